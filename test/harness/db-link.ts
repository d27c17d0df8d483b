// A TCP link between the control plane and a real MariaDB that can cut the connection
// carrying one chosen SQL statement, the way a database that goes away mid-request does.
// Everything else passes through untouched: authentication and rate limiting read the
// real database, and only the write under test meets a dead connection.
import { type Server, type Socket, connect, createServer } from "node:net";
import { onCleanup } from "./cleanup";
import type { Database, MariaDbServer } from "./mariadb";
import { listenOnFreePort } from "./ports";

export interface DbLink {
  /** The server as seen through the link (give it to startCluster as `mariadb`). */
  server: MariaDbServer;
  /**
   * Arms one cut: the next client connection that sends `statement` (e.g. "insert into
   * `audit_events`", as knex writes it) is destroyed before the server sees it. Resolves
   * once that happened.
   */
  cutAt(statement: string): Promise<void>;
  /** As cutAt, for the next `times` connections that send it, one after another; resolves after the last. */
  cutTimes(statement: string, times: number): Promise<void>;
}

interface Armed {
  needle: string;
  left: number;
  fired: () => void;
}

export async function startDbLink(real: MariaDbServer): Promise<DbLink> {
  const target = new URL(real.url);
  let armed: Armed | undefined;
  const sockets = new Set<Socket>();
  const relay = (client: Socket) => {
    const upstream = connect({ host: target.hostname, port: Number(target.port) });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    // A statement fits in one packet; keep the end of the last chunk so one split across
    // two chunks is still seen.
    let recent = "";
    client.on("data", (chunk: Buffer) => {
      recent = (recent + chunk.toString("latin1")).slice(-(chunk.length + 256));
      const cut = armed;
      if (cut && recent.toLowerCase().includes(cut.needle)) {
        cut.left--;
        if (cut.left === 0) armed = undefined;
        client.destroy();
        upstream.destroy();
        if (cut.left === 0) cut.fired();
        return;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  };
  const server: Server = createServer(relay);
  const port = await listenOnFreePort(server);
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  const viaLink = (url: string) => {
    const u = new URL(url);
    u.port = String(port);
    return u.toString().replace(/\/$/, "");
  };
  return {
    server: {
      url: viaLink(real.url),
      createDatabase: async (): Promise<Database> => {
        const db = await real.createDatabase();
        // The control plane goes through the link; the test's own queries go straight.
        return { ...db, url: viaLink(db.url) };
      },
    },
    cutAt: (statement) =>
      new Promise<void>((resolve) => {
        armed = { needle: statement.toLowerCase(), left: 1, fired: resolve };
      }),
    cutTimes: (statement, times) =>
      new Promise<void>((resolve) => {
        armed = { needle: statement.toLowerCase(), left: times, fired: resolve };
      }),
  };
}

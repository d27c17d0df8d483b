// A throwaway MariaDB server (or the one MYSQL_URL names), with a fresh database per caller,
// and a query helper so tests can inspect what the control plane stored.
import { join } from "node:path";
import { installMariaDb, launchMariaDb } from "@relayctl/devkit";
import mysql from "mysql2/promise";
import { makeTempDir, onCleanup } from "./cleanup";
import { onFreePort } from "./ports";
import { ManagedProcess, type SpawnOptions } from "./process";

export type Row = Record<string, unknown>;

export interface Database {
  /** mysql://root@127.0.0.1:P/<name>, for RELAYCTL_DATABASE_URL. */
  url: string;
  name: string;
  query<T extends Row = Row>(sql: string, params?: unknown[]): Promise<T[]>;
  tables(): Promise<string[]>;
  /** Every row of every table, as text (binary columns decoded as UTF-8): for "appears nowhere". */
  dumpText(): Promise<string>;
}

export interface MariaDbServer {
  /** Server URL without a database. */
  url: string;
  createDatabase(): Promise<Database>;
}

function randomName(): string {
  return `rc_${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
}

function asText(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (Buffer.isBuffer(value)) return value.toString("utf8");
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function openDatabase(serverUrl: string, name: string, external: boolean): Database {
  const pool = mysql.createPool({ uri: `${serverUrl}/${name}`, connectionLimit: 2, dateStrings: true });
  onCleanup(() => pool.end());
  // A throwaway server goes with its data dir; on MYSQL_URL's server, drop what we created.
  if (external) onCleanup(() => pool.query(`DROP DATABASE IF EXISTS \`${name}\``).then(() => undefined));
  const query = async <T extends Row>(sql: string, params: unknown[] = []) => {
    const [rows] = await pool.query(sql, params);
    return rows as T[];
  };
  const tables = async () => (await query("SHOW TABLES")).map((r) => String(Object.values(r)[0]));
  const dumpText = async () => {
    const out: string[] = [];
    for (const table of await tables()) {
      for (const row of await query(`SELECT * FROM \`${table}\``)) {
        out.push(
          `${table}: ${Object.entries(row)
            .map(([k, v]) => `${k}=${asText(v)}`)
            .join(" | ")}`,
        );
      }
    }
    return out.join("\n");
  };
  return { url: `${serverUrl}/${name}`, name, query, tables, dumpText };
}

function serverHandle(url: string, external: boolean): MariaDbServer {
  return {
    url,
    createDatabase: async () => {
      const name = randomName();
      const conn = await mysql.createConnection({ uri: url });
      try {
        await conn.query(`CREATE DATABASE \`${name}\``);
      } finally {
        await conn.end();
      }
      return openDatabase(url, name, external);
    },
  };
}

/** A throwaway server this test owns, so it can stop it and start it again on the same port. */
export interface OwnedMariaDbServer extends MariaDbServer {
  stop(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
}

/** Installed and started by @relayctl/devkit (installMariaDb, launchMariaDb), supervised by this file. */
export async function startOwned(): Promise<OwnedMariaDbServer> {
  const dir = makeTempDir("mariadb");
  const dataDir = join(dir, "db");
  const launch = (o: SpawnOptions) => new ManagedProcess(o);
  await installMariaDb({ dataDir, logDir: dir, launch });
  let port = 0;
  let proc: ManagedProcess;
  const start = async () => {
    const logFile = join(dir, `mariadbd-${Date.now()}.log`);
    proc = (await launchMariaDb({ dir, dataDir, port, logFile, launch })) as ManagedProcess;
  };
  // mariadbd cannot pick a port itself (--port=0 means 3306): a port taken between freePort
  // and its bind makes it exit, and it starts again on another one.
  await onFreePort(async (p) => {
    port = p;
    await start();
  });
  return {
    ...serverHandle(`mysql://root@127.0.0.1:${port}`, false),
    start,
    stop: async (signal: NodeJS.Signals = "SIGKILL") => {
      await proc.stop(signal);
    },
  };
}

/** MYSQL_URL's server when set (its path, if any, is ignored), else a throwaway mariadbd. */
export function startMariaDb(): Promise<MariaDbServer> {
  const external = process.env.MYSQL_URL;
  if (external) {
    const u = new URL(external);
    u.pathname = "";
    return Promise.resolve(serverHandle(u.toString().replace(/\/$/, ""), true));
  }
  return startOwned();
}

let shared: Promise<MariaDbServer> | undefined;

/** One server per test file; every cluster gets its own database on it. */
export function sharedMariaDb(): Promise<MariaDbServer> {
  shared ??= startMariaDb();
  return shared;
}

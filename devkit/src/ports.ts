// Ports for throwaway servers. The race-free way is to let the server bind port 0 (or its own
// "any port" value) and report the port it got: our control plane logs it ("api listening",
// "gateway listening"), nats-server with `-p -1` logs "Listening for client connections on
// host:port" (see listenPortOf). Some servers cannot report one: mariadbd takes port 0 as
// "the default, 3306", and Caddy's admin API logs the configured address, not the bound one,
// and binds again at every config load. For those, freePort picks a port that was free a
// moment ago, and onFreePort starts again on another one when it was taken in between.
import { createServer } from "node:net";

/** A port that was free a moment ago: bind 127.0.0.1:0, read the port, close. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error("no port from listen(0)"));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

/**
 * Runs start(port) on a freePort() until it succeeds, or `attempts` times. start must fail
 * (the server exits) when the port was taken between freePort and the server's bind.
 */
export async function onFreePort<T>(start: (port: number) => Promise<T>, attempts = 3): Promise<T> {
  for (let i = 1; ; i++) {
    const port = await freePort();
    try {
      return await start(port);
    } catch (err) {
      if (i >= attempts) throw err;
    }
  }
}

/** The port in a "... on 127.0.0.1:4222" log line (nats-server's listen line), if any. */
export function listenPortOf(text: string, marker: string): number | undefined {
  const at = text.indexOf(marker);
  if (at < 0) return undefined;
  const m = /:(\d{1,5})\b/.exec(text.slice(at + marker.length));
  return m ? Number(m[1]) : undefined;
}

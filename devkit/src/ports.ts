// Ports for throwaway servers. The race-free way is to let the server bind port 0 (or its own
// "any port" value) and report the port it got: our control plane logs it ("api listening",
// "gateway listening"), nats-server with `-p -1` logs "Listening for client connections on
// host:port" (see listenPortOf). Some servers cannot report one: mariadbd takes port 0 as
// "the default, 3306", and Caddy's admin API logs the configured address, not the bound one,
// and binds again at every config load. For those, freePort picks a port that was free a
// moment ago, and onFreePort starts again on another one when it was taken in between.
//
// A port freePort hands out stays claimed until its process ends, so no other pick, in this
// process or another one, hands it out again: a Caddy's http port is bound only when routes are
// loaded, and its admin port is bound again at every config load, so a port that is free now may
// be one a server of a test running beside it is about to take (two of 25 Caddys started at once
// in one file collided in one run out of 75: one's admin calls reached the other's http routes).
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Where picked ports come from: below the kernel's ephemeral range (see freePort). */
const PICK_FLOOR = 10_000;
const PICK_TRIES = 20;

/** The first port of the kernel's ephemeral range (Linux default 32768). */
function ephemeralStart(): number {
  try {
    const first = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0],
    );
    if (Number.isInteger(first) && first > PICK_FLOOR + 1000) return first;
  } catch {
    // Not Linux: the default range.
  }
  return 32_768;
}

/** Where claims are kept, one file per port holding its claimer's pid: shared by every process. */
const CLAIMS = join(tmpdir(), "relayctl-port-claims");
const claimed = new Set<number>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Claims port for this process; false when a live process (this one included) holds it. */
function claim(port: number): boolean {
  if (claimed.has(port)) return false;
  const file = join(CLAIMS, String(port));
  for (let i = 0; i < 2; i++) {
    try {
      const fd = openSync(file, "wx", 0o644);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return held(port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        try {
          mkdirSync(CLAIMS, { recursive: true });
        } catch {
          return held(port); // no claims here (a read-only tmp): this process's own only
        }
      } else if (code !== "EEXIST") return held(port);
      else {
        let owner = Number.NaN;
        try {
          owner = Number(readFileSync(file, "utf8"));
        } catch {
          // Released meanwhile: try again.
        }
        if (Number.isInteger(owner) && owner > 0 && alive(owner)) return false;
        try {
          unlinkSync(file); // a claim of a process that ended without releasing it (killed)
        } catch {
          // Another picker took it over first: try again, the wx open decides.
        }
      }
    }
  }
  return false;
}

function held(port: number): true {
  if (claimed.size === 0) process.once("exit", releaseClaims);
  claimed.add(port);
  return true;
}

function releaseClaims(): void {
  for (const port of claimed) rmSync(join(CLAIMS, String(port)), { force: true });
}

/** Resolves with `port` once it is bound and closed again, or with undefined when it is taken. */
function tryBind(port: number): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", (err: NodeJS.ErrnoException) =>
      err.code === "EADDRINUSE" || err.code === "EACCES" ? resolve(undefined) : reject(err),
    );
    server.listen(port, "127.0.0.1", () => {
      const address = server.address();
      if (address === null || typeof address === "string") {
        server.close();
        reject(new Error(`no address from listen(${port})`));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

/**
 * A port that was free a moment ago. Picked at random below the kernel's ephemeral range, not by
 * listen(0): listen(0) hands out ephemeral ports, the same pool every outgoing connection's local
 * port comes from, and a full test run opens thousands of those, so a port from listen(0) could be
 * taken by a connection before the server that was meant to have it binds. Below the range only
 * another picker can take it, and a port claimed by a live process is never picked again (see the
 * claims above). Falls back to listen(0).
 */
export async function freePort(): Promise<number> {
  const span = ephemeralStart() - PICK_FLOOR;
  for (let i = 0; i < PICK_TRIES; i++) {
    const pick = PICK_FLOOR + Math.floor(Math.random() * span);
    if (!claim(pick)) continue;
    const port = await tryBind(pick);
    if (port !== undefined) return port;
  }
  const any = await tryBind(0);
  if (any === undefined) throw new Error("no free port from listen(0)");
  return any;
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

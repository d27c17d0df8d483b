// Ports for throwaway servers, picked below the kernel's ephemeral range (freePort). Not port 0,
// although a server that binds port 0 and reports what it got cannot lose its port to a race:
// listen(0) hands out ports of the ephemeral range, and on a machine running podman containers
// such a port can be one a stopped container's DNAT rules still send elsewhere for a few seconds
// (listenOnFreePort says how), so a server given it is cut off from its clients. An in-process
// server binds with listenOnFreePort; a server process is started on a pick with onFreePort, which
// starts it again on another one when the pick was taken in between (mariadbd, Caddy, nginx,
// nats-server, the control plane, docker-registry).
//
// A port freePort hands out stays claimed until its process ends, so no other pick, in this
// process or another one, hands it out again: a Caddy's http port is bound only when routes are
// loaded, and its admin port is bound again at every config load, so a port that is free now may
// be one a server of a test running beside it is about to take (two of 25 Caddys started at once
// in one file collided in one run out of 75: one's admin calls reached the other's http routes).
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { type Server, createServer } from "node:net";
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

/**
 * Binds `server` (an http, https or net server) on a freePort() of `host` and resolves with the
 * port; a port taken between the pick and the bind is given up for another one. For a test's
 * own servers in place of listen(0): a port of the ephemeral range can be one a stopped
 * container's DNAT rules still send elsewhere. Podman 4 picks a published container's host port
 * from that range (it binds port 0), and its cleanup removes the container's rules seconds after
 * conmon released the port (watched in CI runs: "Exited (143) 3 seconds ago" with the rules in
 * place), so a server given that port by listen(0) meanwhile is cut off: its clients' connections
 * go to the dead container's address and are refused ("Failed to connect ... after 0 ms").
 */
export function listenOnFreePort(server: Server, host = "127.0.0.1", attempts = 5): Promise<number> {
  return onFreePort(
    (port) =>
      new Promise<number>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve(port);
        });
      }),
    attempts,
  );
}

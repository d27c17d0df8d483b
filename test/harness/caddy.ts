// A throwaway Caddy: `caddy run` with a boot config that holds only the admin
// API on a free loopback port, HOME and the XDG dirs in a temp dir (so it never
// touches the real user's data or certificates). Routes are written by the code
// under test through the admin API; restart() brings Caddy back with only its
// boot config, which is what a Caddy restart without a saved config does.
import { type AdminResponse, caddyAdmin } from "../../reverse-proxy-sync/src/caddy-admin";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeTempDir } from "./cleanup";
import { freePort, onFreePort } from "./ports";
import { ManagedProcess } from "./process";
import { pollUntil } from "./wait";

const READY_MS = 15_000;

export interface CaddyServer {
  /** http://127.0.0.1:<admin port> */
  adminUrl: string;
  /** A free port for the writer's listen address, e.g. [`127.0.0.1:${httpPort}`]. */
  httpPort: number;
  dir: string;
  /** One admin API call on a fresh connection (Caddy drops idle ones at each config load). */
  admin(method: string, path: string, body?: unknown): Promise<AdminResponse>;
  /** Kills Caddy and starts it again with only its boot config: every route is gone. */
  restart(): Promise<void>;
  /** Kills Caddy (SIGKILL, as a crash) and leaves it down until start(). */
  kill(): Promise<void>;
  /** Starts a killed Caddy again on the same admin port, with only its boot config. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

function caddyBinary(): string {
  return existsSync("/usr/bin/caddy") ? "/usr/bin/caddy" : "caddy";
}

async function adminReady(adminUrl: string): Promise<true | undefined> {
  const res = await caddyAdmin(adminUrl, "GET", "/config/", undefined, 2_000);
  return res.status === 200 ? true : undefined;
}

export async function startCaddy(): Promise<CaddyServer> {
  const dir = makeTempDir("caddy");
  // Caddy logs its configured admin address, not a bound one, and binds it again at each
  // config load, so port 0 cannot be used: a port taken between freePort and Caddy's bind
  // makes it exit at start, and it starts again on another one. The http port is bound
  // later, by the routes the code under test loads.
  const httpPort = await freePort();
  const bootFile = join(dir, "boot.json");
  const env = { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir };
  let generation = 0;
  let proc: ManagedProcess | undefined;
  let adminPort = 0;
  const launch = async () => {
    generation += 1;
    const adminUrl = `http://127.0.0.1:${adminPort}`;
    const p = new ManagedProcess({
      name: `caddy-${adminPort}`,
      command: caddyBinary(),
      args: ["run", "--config", bootFile],
      env,
      cwd: dir,
      logFile: join(dir, `caddy-${generation}.log`),
    });
    proc = p;
    await Promise.race([
      pollUntil(() => adminReady(adminUrl), { what: `caddy admin API ${adminUrl}`, timeoutMs: READY_MS }),
      p.exited.then((e) => {
        throw new Error(`caddy exited at start (code ${e.code}):\n${p.tail()}`);
      }),
    ]);
  };
  await onFreePort(async (port) => {
    adminPort = port;
    writeFileSync(bootFile, JSON.stringify({ admin: { listen: `127.0.0.1:${port}` } }));
    await launch();
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  return {
    adminUrl,
    httpPort,
    dir,
    admin: (method, path, body) => caddyAdmin(adminUrl, method, path, body),
    restart: async () => {
      // SIGKILL: a crash or an operator's kill, not a graceful stop that could persist anything.
      await proc?.stop("SIGKILL");
      await launch();
    },
    kill: async () => {
      await proc?.stop("SIGKILL");
    },
    start: () => launch(),
    stop: async () => {
      await proc?.stop();
    },
  };
}

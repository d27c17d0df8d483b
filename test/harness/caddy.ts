// A throwaway Caddy: `caddy run` with a boot config that holds only the admin
// API on a free loopback port, HOME and the XDG dirs in a temp dir (so it never
// touches the real user's data or certificates). Routes are written by the code
// under test through the admin API; restart() brings Caddy back with only its
// boot config, which is what a Caddy restart without a saved config does.
import { type AdminResponse, caddyAdmin } from "../../reverse-proxy-sync/src/caddy-admin";
import { join } from "node:path";
import { launchCaddy } from "@relayctl/devkit";
import { makeTempDir } from "./cleanup";
import { freePort, onFreePort } from "./ports";
import { ManagedProcess } from "./process";

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

export async function startCaddy(): Promise<CaddyServer> {
  const dir = makeTempDir("caddy");
  // Caddy logs its configured admin address, not a bound one, and binds it again at each
  // config load, so port 0 cannot be used: a port taken between freePort and Caddy's bind
  // makes it exit at start, and it starts again on another one. The http port is bound
  // later, by the routes the code under test loads.
  const httpPort = await freePort();
  let generation = 0;
  let proc: ManagedProcess | undefined;
  let adminPort = 0;
  // @relayctl/devkit's launchCaddy (boot config, HOME and XDG dirs in dir), supervised by this file.
  const launch = async () => {
    generation += 1;
    proc = (await launchCaddy({
      name: `caddy-${adminPort}`,
      adminPort,
      home: dir,
      bootFile: join(dir, "boot.json"),
      logFile: join(dir, `caddy-${generation}.log`),
      launch: (o) => new ManagedProcess(o),
    })) as ManagedProcess;
  };
  await onFreePort(async (port) => {
    adminPort = port;
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

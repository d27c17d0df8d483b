// A throwaway Caddy for a bench run: admin API on a free loopback port, no apps until the agent or
// the bench loads some. Admin calls go through reverse-proxy-sync's caddyAdmin (built), which gives
// every call a connection of its own: Caddy restarts its admin server on each config load.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { freePort, onFreePort } from "./processes.mjs";
import { requireOnPath } from "./throwaway-servers.mjs";

/**
 * Caddy with only its admin API configured; ready when it logs "serving initial configuration".
 * `name` tells two Caddies of one run apart (process name, log file, home dir).
 */
export async function startCaddy(group, dir, name = "caddy") {
  const bin = requireOnPath("caddy", "install the Debian package caddy (make bench does)");
  const httpPort = await freePort();
  const home = join(dir, name);
  const bootFile = join(dir, `${name}-boot.json`);
  const env = { ...process.env, HOME: home, XDG_DATA_HOME: home, XDG_CONFIG_HOME: home };
  // Caddy logs its configured admin address, not a bound one, so port 0 cannot be used: a port
  // taken between freePort and Caddy's bind makes it exit, and it starts again on another one.
  let proc;
  const adminPort = await onFreePort(async (port) => {
    await writeFile(bootFile, JSON.stringify({ admin: { listen: `127.0.0.1:${port}` } }));
    proc = group.start(name, bin, ["run", "--config", bootFile], { env, cwd: dir });
    await proc.waitForMsg("serving initial configuration", { timeoutMs: 15_000 });
    return port;
  });
  return { adminUrl: `http://127.0.0.1:${adminPort}`, httpPort, proc };
}

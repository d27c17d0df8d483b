// A throwaway Caddy for a bench run: admin API on a free loopback port, no apps until the agent or
// the bench loads some; started by @relayctl/devkit's launchCaddy, as the test harness starts its
// own. Admin calls go through reverse-proxy-sync's caddyAdmin (built), which gives every call a
// connection of its own: Caddy restarts its admin server on each config load.
import { join } from "node:path";
import { launchCaddy } from "@relayctl/devkit";
import { freePort, onFreePort } from "./processes.mjs";
import { requireOnPath } from "./throwaway-servers.mjs";

/**
 * Caddy with only its admin API configured, ready once it serves that configuration.
 * `name` tells two Caddies of one run apart (process name, log file, home dir).
 */
export async function startCaddy(group, dir, name = "caddy") {
  requireOnPath("caddy", "install the Debian package caddy (make bench does)");
  // The http port goes into the routes the bench loads later: picked ahead.
  const httpPort = await freePort();
  // Caddy logs its configured admin address, not a bound one, so port 0 cannot be used: a port
  // taken between freePort and Caddy's bind makes it exit, and it starts again on another one.
  let proc;
  const adminPort = await onFreePort(async (port) => {
    proc = await launchCaddy({
      name,
      adminPort: port,
      home: join(dir, name),
      bootFile: join(dir, `${name}-boot.json`),
      logFile: join(dir, `${name}.log`),
      launch: group.launch,
    });
    return port;
  });
  return { adminUrl: `http://127.0.0.1:${adminPort}`, httpPort, proc };
}

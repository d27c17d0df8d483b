// Host settings the agent cannot change but an operator should know about,
// logged once at start.
import { readFileSync } from "node:fs";
import type { ProxyConfig } from "../config.js";
import type { Logger } from "../log.js";

const MIGRATE_REQ = "/proc/sys/net/ipv4/tcp_migrate_req";

/**
 * Caddy 2.6 replaces its SO_REUSEPORT listener at every config load; with
 * net.ipv4.tcp_migrate_req=0 the kernel resets connections still queued on the
 * old socket, so a deployment's switch (or any route change) can drop a request.
 */
export function warnAboutHost(
  proxy: ProxyConfig,
  log: Logger,
  read = (p: string) => readFileSync(p, "utf8"),
) {
  if (proxy.kind !== "caddy" || process.platform !== "linux") return;
  let value: string;
  try {
    value = read(MIGRATE_REQ).trim();
  } catch {
    return; // Linux < 5.14: nothing to set
  }
  if (value === "0")
    log.warn(
      { sysctl: "net.ipv4.tcp_migrate_req", value },
      "Caddy reloads may reset queued connections during a switch: set net.ipv4.tcp_migrate_req=1 for zero-downtime deployments",
    );
}

// One check of the reverse proxy the agent writes routes to (RELAYCTL_AGENT_PROXY),
// cheap enough to run every recheck interval: Caddy's admin API must answer
// GET /config/ within a short deadline; nginx's binary must be there and its
// conf dir writable (`nginx -t` parses every site: too heavy for a periodic
// check, and the route write runs it anyway); Traefik's dir must be writable
// (its file provider has no API of ours to ask). The status is what the
// gateway stores and GET /api/servers shows as `proxy`.
import { constants } from "node:fs";
import { access } from "node:fs/promises";
import { delimiter, join } from "node:path";
import type { ProxyStatus } from "@relayctl/proto";
import { caddyAdmin } from "@relayctl/reverse-proxy-sync";
import type { ProxyConfig } from "../config.js";

/** Caddy answers its admin API in milliseconds; a busy machine gets this long. */
export const CADDY_CHECK_MS = 3000;

export const NONE_DETAIL =
  "no reverse proxy configured (RELAYCTL_AGENT_PROXY=none): deployments only record where applications listen";

export interface CheckOptions {
  /** @default CADDY_CHECK_MS */
  caddyTimeoutMs?: number;
  /** PATH searched for a bare nginx binary name. @default process.env.PATH */
  path?: string;
}

export async function checkProxy(proxy: ProxyConfig, opts: CheckOptions = {}): Promise<ProxyStatus> {
  switch (proxy.kind) {
    case "none":
      return { kind: "none", ok: true, detail: NONE_DETAIL };
    case "caddy":
      return checkCaddy(proxy.adminUrl, opts.caddyTimeoutMs ?? CADDY_CHECK_MS);
    case "nginx": {
      const bin = await findBinary(proxy.nginxBin, opts.path ?? process.env.PATH ?? "");
      if (bin === undefined)
        return { kind: "nginx", ok: false, detail: `nginx binary ${proxy.nginxBin} not found` };
      const dir = await writable(proxy.confDir);
      if (dir !== undefined)
        return { kind: "nginx", ok: false, detail: `nginx conf dir ${proxy.confDir} ${dir}` };
      return { kind: "nginx", ok: true, detail: `nginx ${bin}, routes in ${proxy.confDir}` };
    }
    case "traefik": {
      const dir = await writable(proxy.dir);
      if (dir !== undefined) return { kind: "traefik", ok: false, detail: `traefik dir ${proxy.dir} ${dir}` };
      return { kind: "traefik", ok: true, detail: `traefik file provider dir ${proxy.dir}` };
    }
  }
}

async function checkCaddy(adminUrl: string, timeoutMs: number): Promise<ProxyStatus> {
  try {
    const res = await caddyAdmin(adminUrl, "GET", "/config/", undefined, timeoutMs);
    if (res.status === 200)
      return { kind: "caddy", ok: true, detail: `caddy admin API at ${adminUrl} answers` };
    return {
      kind: "caddy",
      ok: false,
      detail: `caddy at ${adminUrl} is not answering: GET /config/ gave HTTP ${res.status}`,
    };
  } catch (err) {
    return {
      kind: "caddy",
      ok: false,
      detail: `caddy at ${adminUrl} is not answering: ${(err as Error).message}`,
    };
  }
}

/** undefined when writable, else why not ("is not writable: EACCES ..."). */
async function writable(dir: string): Promise<string | undefined> {
  try {
    await access(dir, constants.W_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? "does not exist" : `is not writable (${code ?? (err as Error).message})`;
  }
}

/** The executable a name resolves to (PATH lookup for a bare name), undefined when none. */
async function findBinary(name: string, path: string): Promise<string | undefined> {
  const candidates = name.includes("/")
    ? [name]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map((d) => join(d, name));
  for (const c of candidates) {
    try {
      await access(c, constants.X_OK);
      return c;
    } catch {
      // next one
    }
  }
  return undefined;
}

export function sameProxyStatus(a: ProxyStatus | undefined, b: ProxyStatus): boolean {
  return a !== undefined && a.kind === b.kind && a.ok === b.ok && a.detail === b.detail;
}

/**
 * The one log line of a change: what fails and what it costs, or that the proxy
 * is back. `before` is the status the previous line reported (undefined at start).
 */
export function logMessage(before: ProxyStatus | undefined, now: ProxyStatus): string {
  if (now.kind === "none") return `reverse proxy: ${now.detail}`;
  if (!now.ok) return `reverse proxy: ${now.detail} (deploys fail at switch until it is back)`;
  if (before !== undefined && !before.ok) return `reverse proxy: ${now.kind} answering again`;
  return `reverse proxy: ${now.detail}`;
}

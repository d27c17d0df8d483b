// RouteWriter for Caddy through its admin API. Owns one HTTP server,
// apps.http.servers.<serverName>: a route per application tagged
// "@id": "relayctl-app-<id>", other people's routes kept, and our 404 catch-all
// last. Each apply is one read of the live config and one write of the whole
// server (Caddy loads it as one unit and keeps the old config if it is refused).
//
// Caddy 2.6 (measured): PUT creates missing parents (works on a Caddy that has
// only its admin config) but refuses an existing key; PATCH replaces an existing
// value but fails with "invalid traversal path" on a missing one; errors are
// HTTP 4xx/5xx with {"error": "<message>"}.
//
// Each application also gets a health route, "relayctl-health-<id>", matching
// its hosts and exactly HEALTH_PATH, answered by Caddy itself (200 live, 503
// draining). It is a route of its own ahead of the application routes, not a
// subroute inside the application's, so the application route keeps its shape.
import { type AdminResponse, caddyAdmin } from "./caddy-admin.js";
import type { LiveRoute, RouteChange, RouteWriter } from "./route-writer.js";
import { HEALTH_PATH, type RenderedRoute, sortedFqdns } from "./route.js";
import { assertRenderable } from "./writer-support.js";

export interface CaddyWriterOptions {
  /** e.g. http://127.0.0.1:2019 */
  adminUrl: string;
  /** @default "relayctl" */
  serverName?: string;
  /** @default [":443"] with automatic HTTPS, else [":80"] */
  listen?: string[];
  /** @default true */
  automaticHttps?: boolean;
}

type Json = Record<string, unknown>;

const ROUTE_ID_PREFIX = "relayctl-app-";
const HEALTH_ID_PREFIX = "relayctl-health-";
const CATCH_ALL_ID = "relayctl-catchall";
// A config load on a busy Caddy can take a while, but never this long.
const REQUEST_TIMEOUT_MS = 60_000;
/** How long a readAll's view of the server may stand in for apply's own read. */
const SNAPSHOT_MS = 1_000;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** JSON with object keys sorted: Caddy hands config back with its own key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isObject(value)) {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The route JSON this writer produces for one application. */
export function caddyRouteJson(route: RenderedRoute): Json {
  return {
    "@id": `${ROUTE_ID_PREFIX}${route.applicationId}`,
    match: [{ host: route.fqdns }],
    handle: [{ handler: "reverse_proxy", upstreams: [{ dial: route.upstream }] }],
    terminal: true,
  };
}

/** The health route this writer produces for one application: the proxy answers, the app never sees it. */
export function caddyHealthJson(route: RenderedRoute): Json {
  const draining = route.draining === true;
  return {
    "@id": `${HEALTH_ID_PREFIX}${route.applicationId}`,
    match: [{ host: route.fqdns, path: [HEALTH_PATH] }],
    handle: [
      {
        handler: "static_response",
        status_code: draining ? 503 : 200,
        body: draining ? "draining\n" : "live\n",
      },
    ],
    terminal: true,
  };
}

const CATCH_ALL: Json = {
  "@id": CATCH_ALL_ID,
  handle: [{ handler: "static_response", status_code: 404, body: "no route for this host\n" }],
};

function managedId(route: unknown): string | undefined {
  const id = isObject(route) ? route["@id"] : undefined;
  return typeof id === "string" && id.startsWith(ROUTE_ID_PREFIX)
    ? id.slice(ROUTE_ID_PREFIX.length)
    : undefined;
}

function healthId(route: unknown): string | undefined {
  const id = isObject(route) ? route["@id"] : undefined;
  return typeof id === "string" && id.startsWith(HEALTH_ID_PREFIX)
    ? id.slice(HEALTH_ID_PREFIX.length)
    : undefined;
}

function parseRoute(applicationId: string, route: Json, health: Json | undefined): LiveRoute {
  const match = Array.isArray(route.match) ? route.match[0] : undefined;
  const hosts = isObject(match) && Array.isArray(match.host) ? match.host.map(String) : [];
  const handle = Array.isArray(route.handle) ? route.handle[0] : undefined;
  const upstream = isObject(handle) && Array.isArray(handle.upstreams) ? handle.upstreams[0] : undefined;
  const dial = isObject(upstream) && typeof upstream.dial === "string" ? upstream.dial : "";
  const answer = Array.isArray(health?.handle) ? health.handle[0] : undefined;
  const draining = isObject(answer) && answer.status_code === 503;
  const live: RenderedRoute = { applicationId, fqdns: sortedFqdns(hosts), upstream: dial };
  if (draining) live.draining = true;
  // A route without its health route (written before there was one) is drift too: rewritten whole.
  const pristine =
    canonical(route) === canonical(caddyRouteJson(live)) &&
    health !== undefined &&
    canonical(health) === canonical(caddyHealthJson(live));
  return { ...live, pristine };
}

// Exact host names before wildcards: Caddy tries routes in order, and
// `*.example.com` of one application must not shadow `a.example.com` of another.
function byPrecedence(a: Json, b: Json): number {
  const wild = (r: Json) => (JSON.stringify(r.match).includes('"*.') ? 1 : 0);
  return wild(a) - wild(b) || String(a["@id"]).localeCompare(String(b["@id"]));
}

export class CaddyWriter implements RouteWriter {
  readonly kind = "caddy" as const;
  readonly drains = true;
  readonly #admin: string;
  readonly #serverName: string;
  readonly #serverPath: string;
  readonly #listen: string[];
  readonly #automaticHttps: boolean;
  #snapshot: { server: Json | undefined; at: number } | undefined;

  constructor(opts: CaddyWriterOptions) {
    this.#admin = opts.adminUrl.replace(/\/+$/, "");
    this.#serverName = opts.serverName ?? "relayctl";
    this.#serverPath = `/config/apps/http/servers/${encodeURIComponent(this.#serverName)}`;
    this.#automaticHttps = opts.automaticHttps ?? true;
    this.#listen = opts.listen ?? [this.#automaticHttps ? ":443" : ":80"];
  }

  async readAll(): Promise<Map<string, LiveRoute>> {
    const server = await this.#readServer();
    this.#snapshot = { server, at: Date.now() };
    const routes = server && Array.isArray(server.routes) ? server.routes : [];
    const health = new Map<string, Json>();
    for (const route of routes) {
      const id = healthId(route);
      if (id !== undefined && isObject(route)) health.set(id, route);
    }
    const out = new Map<string, LiveRoute>();
    for (const route of routes) {
      const id = managedId(route);
      if (id !== undefined && isObject(route)) out.set(id, parseRoute(id, route, health.get(id)));
    }
    return out;
  }

  async apply(change: RouteChange): Promise<void> {
    assertRenderable(change.upsert);
    const server = await this.#freshServer();
    const next = this.#nextServer(server, change);
    // Only a removal can be a no-op (the route was already gone); an upsert is
    // only asked for when the live route differs. Comparing 100 routes costs ms.
    if (server && change.upsert.length === 0 && canonical(server) === canonical(next)) return;
    // PATCH replaces the server we found; PUT creates it (and any missing parent) when there is none.
    await this.#request(server ? "PATCH" : "PUT", this.#serverPath, next);
  }

  /**
   * The server after the change: our health routes first (a path within a host is
   * narrower than the host), our application routes next, everyone else's after,
   * the catch-all last.
   */
  #nextServer(server: Json | undefined, change: RouteChange): Json {
    const upserts = new Map(change.upsert.map((r) => [r.applicationId, caddyRouteJson(r)]));
    const gone = new Set([...change.remove, ...upserts.keys()]);
    const managed: Json[] = [...upserts.values()];
    const health: Json[] = change.upsert.map(caddyHealthJson);
    const oldHealth = new Map<string, Json>();
    const foreign: unknown[] = [];
    const routes = server && Array.isArray(server.routes) ? server.routes : [];
    for (const route of routes) {
      const id = healthId(route);
      if (id !== undefined && isObject(route)) oldHealth.set(id, route);
    }
    for (const route of routes) {
      const id = managedId(route);
      if (id === undefined) {
        const ours = healthId(route) !== undefined || (isObject(route) && route["@id"] === CATCH_ALL_ID);
        if (!ours) foreign.push(route);
      } else if (!gone.has(id) && isObject(route)) {
        managed.push(route);
        const kept = oldHealth.get(id);
        if (kept) health.push(kept);
      }
    }
    // Settings of the server we do not own (logs, timeouts, other automatic_https keys) are kept.
    const { automatic_https: oldHttps, ...rest } = server ?? {};
    const { disable: _, ...https } = isObject(oldHttps) ? oldHttps : {};
    if (!this.#automaticHttps) https.disable = true;
    return {
      ...rest,
      listen: this.#listen,
      routes: [...health.sort(byPrecedence), ...managed.sort(byPrecedence), ...foreign, CATCH_ALL],
      ...(Object.keys(https).length > 0 ? { automatic_https: https } : {}),
    };
  }

  /**
   * The server as readAll just read it, when apply follows within SNAPSHOT_MS (the
   * syncer calls them back to back), else read again. At 100 routes the second
   * GET is ~2 ms of a sync whose goal is 2x a bare Caddy load.
   */
  async #freshServer(): Promise<Json | undefined> {
    const snapshot = this.#snapshot;
    this.#snapshot = undefined;
    if (snapshot && Date.now() - snapshot.at <= SNAPSHOT_MS) return snapshot.server;
    return this.#readServer();
  }

  async #readServer(): Promise<Json | undefined> {
    const config = await this.#request("GET", "/config/");
    const apps = isObject(config) ? config.apps : undefined;
    const http = isObject(apps) ? apps.http : undefined;
    const servers = isObject(http) ? http.servers : undefined;
    const server = isObject(servers) ? servers[this.#serverName] : undefined;
    return isObject(server) ? server : undefined;
  }

  async #request(method: string, path: string, body?: unknown): Promise<unknown> {
    let res: AdminResponse;
    try {
      res = await caddyAdmin(this.#admin, method, path, body, REQUEST_TIMEOUT_MS);
    } catch (err) {
      throw new Error(`caddy admin API ${this.#admin} unreachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (res.status < 200 || res.status >= 300) {
      const parsed = res.json;
      const why = isObject(parsed) && typeof parsed.error === "string" ? parsed.error : res.text.trim();
      throw new Error(`caddy refused ${method} ${path} (HTTP ${res.status}): ${why}`);
    }
    return res.json;
  }
}

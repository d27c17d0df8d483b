// RouteWriter for Caddy through its admin API. Owns one HTTP server,
// apps.http.servers.<serverName>: a route per application tagged
// "@id": "relayctl-app-<id>", other people's routes kept, and our 404 catch-all
// last. Each apply is one write of the whole server (Caddy loads it as one unit
// and keeps the old config if it is refused), made on the server as this writer
// last read or wrote it and conditional on Caddy still holding exactly that
// (If-Match with the server's ETag: caddy-etag.ts). So the server is read only at
// the start, after a refused write, or when someone else changed it (412: the
// write is refused whole, and the syncer reads and plans again), and a route
// someone else added to the server is never dropped by a write that did not see it.
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
import { caddyEtagOf, fnv32aEtag } from "./caddy-etag.js";
import { type Json, compareIds, idKey, isObject, sameJson } from "./caddy-json.js";
import { type LiveRoute, ProxyChangedError, type RouteChange, type RouteWriter } from "./route-writer.js";
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

const ROUTE_ID_PREFIX = "relayctl-app-";
const HEALTH_ID_PREFIX = "relayctl-health-";
const CATCH_ALL_ID = "relayctl-catchall";
// A config load on a busy Caddy can take a while, but never this long.
const REQUEST_TIMEOUT_MS = 60_000;

/**
 * The server as this writer last read or wrote it. `etag`: Caddy's ETag of it, when
 * known (a write is then conditional on it); `server` undefined: Caddy had none.
 */
interface View {
  server: Json | undefined;
  etag: string | undefined;
  /** The ETag is to be made here from `server` (after a write): off the answer's path (#prepare). */
  unhashed?: boolean;
  /** Our routes in `server`, parsed once. */
  routes?: Map<string, LiveRoute>;
  /** When it was read (a write leaves none). */
  readAt?: number;
}

/**
 * How long a read without an ETag (a Caddy before 2.6) may stand in for apply's own
 * read: the syncer reads and applies back to back. With an ETag a view stands as long
 * as Caddy still holds it (the write is conditional).
 */
const UNCHECKED_VIEW_MS = 1_000;

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
    sameJson(route, caddyRouteJson(live)) && health !== undefined && sameJson(health, caddyHealthJson(live));
  return { ...live, pristine };
}

// Exact host names before wildcards: Caddy tries routes in order, and
// `*.example.com` of one application must not shadow `a.example.com` of another.
// Each route's key is made once: a comparator making them on every comparison
// (two JSON texts and a localeCompare each) took ~1.1-1.7 ms for 100 routes, on
// the write's path.
function byPrecedence(routes: Json[]): Json[] {
  const keyed = routes.map((r) => ({
    r,
    wild: JSON.stringify(r.match).includes('"*.') ? 1 : 0,
    ...idKey(String(r["@id"])),
  }));
  keyed.sort((a, b) => a.wild - b.wild || compareIds(a, b));
  return keyed.map((k) => k.r);
}

export class CaddyWriter implements RouteWriter {
  readonly kind = "caddy" as const;
  readonly drains = true;
  readonly #admin: string;
  readonly #serverName: string;
  readonly #serverPath: string;
  readonly #listen: string[];
  readonly #automaticHttps: boolean;
  #view: View | undefined;
  /** Caddy's ETags are FNV-1a of the body (2.6), so this writer can make the ETag of what it writes. */
  #etagsKnown = false;

  constructor(opts: CaddyWriterOptions) {
    this.#admin = opts.adminUrl.replace(/\/+$/, "");
    this.#serverName = opts.serverName ?? "relayctl";
    this.#serverPath = `/config/apps/http/servers/${encodeURIComponent(this.#serverName)}`;
    this.#automaticHttps = opts.automaticHttps ?? true;
    this.#listen = opts.listen ?? [this.#automaticHttps ? ":443" : ":80"];
  }

  async readAll(): Promise<Map<string, LiveRoute>> {
    const view = await this.#readServer();
    this.#view = view;
    view.routes = routesOf(view.server);
    return view.routes;
  }

  known(): Map<string, LiveRoute> | undefined {
    const view = this.#view;
    if (view?.server === undefined || this.#hashed(view).etag === undefined) return undefined;
    view.routes ??= routesOf(view.server);
    return view.routes;
  }

  async apply(change: RouteChange): Promise<void> {
    assertRenderable(change.upsert);
    const view = this.#usable(this.#view) ?? (await this.#readServer());
    this.#view = undefined; // until this write's outcome is known
    const server = view.server;
    const next = this.#nextServer(server, change);
    // Only a removal can be a no-op (the route was already gone); an upsert is
    // only asked for when the live route differs. Comparing 100 routes costs ms.
    if (server && change.upsert.length === 0 && sameJson(server, next)) {
      this.#view = view;
      return;
    }
    // PATCH replaces the server we found, only while Caddy still holds it as we found it; PUT
    // creates it (and any missing parent) when there is none, and is refused if one appeared.
    const ifMatch: Record<string, string> = server && view.etag ? { "If-Match": view.etag } : {};
    const res = await this.#send(server ? "PATCH" : "PUT", this.#serverPath, next, ifMatch);
    // 412: the server is no longer what we saw; a traversal error: it is gone with its parents (a
    // Caddy restarted with only its boot config); 409 on PUT: one appeared meanwhile.
    if (res.status === 412 || (server ? missingPath(res) : res.status === 409)) {
      throw new ProxyChangedError(
        `caddy's server '${this.#serverName}' was changed by someone else since it was read: nothing was written`,
      );
    }
    this.#check(server ? "PATCH" : "PUT", this.#serverPath, res);
    const written: View = { server: next, etag: undefined, unhashed: this.#etagsKnown };
    this.#view = written;
    // Its ETag and parsed routes (~2-3 ms at 100 routes) are made once this turn's answer is on its
    // way (a timer runs after the microtasks that send it), or by the next turn if it comes first.
    setTimeout(() => {
      if (this.#view === written && this.#hashed(written).etag !== undefined)
        written.routes ??= routesOf(next);
    }, 0).unref();
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
      routes: [...byPrecedence(health), ...byPrecedence(managed), ...foreign, CATCH_ALL],
      ...(Object.keys(https).length > 0 ? { automatic_https: https } : {}),
    };
  }

  /**
   * A view apply may write on: one with an ETag (the write is conditional), none
   * of a server (PUT is refused if one appeared), or a read just made.
   */
  #usable(view: View | undefined): View | undefined {
    if (view === undefined) return undefined;
    if (this.#hashed(view).etag !== undefined || view.server === undefined) return view;
    return view.readAt !== undefined && Date.now() - view.readAt <= UNCHECKED_VIEW_MS ? view : undefined;
  }

  /** The view with the ETag of what this writer wrote, made now if not yet (~1 ms at 100 routes). */
  #hashed(view: View): View {
    if (view.unhashed && view.server !== undefined) {
      view.etag = caddyEtagOf(this.#serverPath, view.server);
      view.unhashed = false;
    }
    return view;
  }

  /** Our server and its ETag; undefined server when Caddy has none (or not even its parents). */
  async #readServer(): Promise<View> {
    const readAt = Date.now();
    const res = await this.#send("GET", this.#serverPath);
    const none = res.status === 400 && missingPath(res);
    if (!none) this.#check("GET", this.#serverPath, res);
    const server = !none && isObject(res.json) ? res.json : undefined;
    if (server) this.#etagsKnown = this.#hashedHere(this.#serverPath, res);
    // No server yet: what Caddy hashes with is learnt from its root, so the write creating it
    // leaves a view the next one can go on.
    else if (!this.#etagsKnown)
      this.#etagsKnown = this.#hashedHere("/config/", await this.#send("GET", "/config/"));
    return { server, etag: server ? res.etag : undefined, readAt };
  }

  /** Whether Caddy's ETag of this read is the one made here from its body (Caddy 2.6's FNV-1a). */
  #hashedHere(path: string, res: AdminResponse): boolean {
    return res.status === 200 && res.etag !== undefined && res.etag === fnv32aEtag(path, res.text);
  }

  async #send(method: string, path: string, body?: unknown, headers?: Record<string, string>) {
    try {
      return await caddyAdmin(this.#admin, method, path, body, REQUEST_TIMEOUT_MS, headers);
    } catch (err) {
      throw new Error(`caddy admin API ${this.#admin} unreachable: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  #check(method: string, path: string, res: AdminResponse): void {
    if (res.status >= 200 && res.status < 300) return;
    const parsed = res.json;
    const why = isObject(parsed) && typeof parsed.error === "string" ? parsed.error : res.text.trim();
    throw new Error(`caddy refused ${method} ${path} (HTTP ${res.status}): ${why}`);
  }
}

/** Caddy's answer for a path whose parents do not exist (400 on a read, 500 on a conditional write). */
function missingPath(res: AdminResponse): boolean {
  const error = isObject(res.json) && typeof res.json.error === "string" ? res.json.error : "";
  return res.status >= 400 && error.startsWith("invalid traversal path");
}

/** Our managed routes in a server's config, by application. */
function routesOf(server: Json | undefined): Map<string, LiveRoute> {
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

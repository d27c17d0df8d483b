// Reconciles desired routes with the route ledger and the live proxy, and
// decides per route: noop, synced, drift_recovered or failed. It also removes
// routes that must not stay: applications that no longer exist, explicit
// removals, and another application's route claiming a domain asked for here
// (two competing routes for one domain is a known Dokploy bug). Everything goes
// to the writer as one apply, so the proxy takes a request whole or not at all.
import type { RouteLedger } from "./ledger.js";
import type { LiveRoute, RouteWriter } from "./route-writer.js";
import {
  type DesiredRoute,
  type RenderedRoute,
  type UpstreamMode,
  renderRoute,
  routeProblem,
  routeSignature,
  sameRoute,
  upstreamFor,
  validApplicationId,
} from "./route.js";

export interface RouteSyncerOptions {
  writer: RouteWriter;
  ledger: RouteLedger;
  upstreamMode: UpstreamMode;
}

export interface SyncRequest {
  routes: DesiredRoute[];
  /**
   * Applications of this server that still exist. When given, every managed
   * route (in the ledger or live) of any other application is removed; an
   * empty array therefore removes every route not in `routes`.
   */
  knownApplicationIds?: string[];
  /** Applications whose routes are removed explicitly (an application was deleted). */
  remove?: string[];
  /**
   * Applications marked draining on this server: their health path answers 503
   * until they are in `undrain`. Kept in the ledger, so every later sync (a
   * deployment's switch) writes the route still draining. An application this
   * server has no route for has nothing to drain (its host is the catch-all's 404).
   */
  drain?: string[];
  /** Applications whose drain ends: their health path answers 200 again. */
  undrain?: string[];
}

export type RouteStatus = "synced" | "noop" | "drift_recovered" | "failed";

export interface RouteOutcome {
  applicationId: string;
  status: RouteStatus;
  signatureHash: string;
  fqdns: string[];
  upstream: string;
  error?: string;
}

export interface SyncReport {
  routes: RouteOutcome[];
  /** Applications whose routes were removed (from the proxy, the ledger or both). */
  removed: string[];
}

interface Plan {
  route: DesiredRoute;
  rendered: RenderedRoute;
  outcome: RouteOutcome;
  /** The proxy needs a write for this route. */
  write: boolean;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class RouteSyncer {
  readonly #writer: RouteWriter;
  readonly #ledger: RouteLedger;
  readonly #mode: UpstreamMode;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(opts: RouteSyncerOptions) {
    this.#writer = opts.writer;
    this.#ledger = opts.ledger;
    this.#mode = opts.upstreamMode;
  }

  /**
   * Runs one sync; concurrent calls wait their turn (each reads the proxy the previous one left).
   * The request may still be in the making (the agent's port check): its turn's read of the
   * proxy runs meanwhile, and nothing is planned or written before the request is there.
   */
  sync(req: SyncRequest | Promise<SyncRequest>): Promise<SyncReport> {
    const run = this.#queue.then(() => this.#readThenSync(Promise.resolve(req)));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The proxy's read beside the request's making. Both are settled before the turn ends, so a
   * read of a failed turn cannot land after the next turn's read (the Caddy writer keeps its
   * last read for apply).
   */
  async #readThenSync(pending: Promise<SyncRequest>): Promise<SyncReport> {
    const [asked, read] = await Promise.allSettled([pending, this.#writer.readAll()]);
    if (asked.status === "rejected") throw asked.reason;
    return this.#sync(asked.value, read);
  }

  async #sync(req: SyncRequest, read: PromiseSettledResult<Map<string, LiveRoute>>): Promise<SyncReport> {
    const draining = this.#drainState(req);
    const asked = new Set(req.routes.map((r) => r.applicationId));
    // A drain change of a route not asked for rewrites it as the ledger last applied it.
    const fromLedger = [...draining.keys()]
      .filter((id) => !asked.has(id))
      .flatMap((id) => {
        const e = this.#ledger.get(id);
        if (e === undefined) return [];
        const { applicationId, containerName, containerPort, imageTag, fqdns, upstream } = e;
        return [{ applicationId, containerName, containerPort, imageTag, fqdns, upstream }];
      });
    const plans = this.#plan([...req.routes, ...fromLedger], draining);
    const valid = plans.filter((p) => p.outcome.status !== "failed");
    if (read.status === "rejected") {
      const why = `could not read the ${this.#writer.kind} proxy: ${message(read.reason)}`;
      for (const p of valid) Object.assign(p.outcome, { status: "failed", error: why });
      return { routes: plans.map((p) => p.outcome), removed: [] };
    }
    const live = read.value;
    for (const p of valid) this.#classify(p, live.get(p.route.applicationId));
    const removals = this.#removals(req, plans, valid, live);
    const upsert = valid.filter((p) => p.write).map((p) => p.rendered);
    if (upsert.length > 0 || removals.some((id) => live.has(id))) {
      try {
        await this.#writer.apply({ upsert, remove: removals });
      } catch (err) {
        for (const p of valid)
          if (p.write) Object.assign(p.outcome, { status: "failed", error: message(err) });
        return { routes: plans.map((p) => p.outcome), removed: [] };
      }
    }
    const removed = removals.filter((id) => live.has(id) || this.#ledger.get(id) !== undefined);
    await this.#record(valid, removed, draining);
    return { routes: plans.map((p) => p.outcome), removed };
  }

  /** The drain state each application asked about, or with a change, is to have after this sync. */
  #drainState(req: SyncRequest): Map<string, boolean> {
    const out = new Map<string, boolean>();
    for (const r of req.routes)
      out.set(r.applicationId, this.#ledger.get(r.applicationId)?.draining === true);
    for (const id of req.undrain ?? []) if (validApplicationId(id)) out.set(id, false);
    for (const id of req.drain ?? []) if (validApplicationId(id)) out.set(id, true);
    return out;
  }

  /** Outcomes start as `synced`; routes that must not reach the proxy are `failed` here. */
  #plan(routes: DesiredRoute[], draining: Map<string, boolean>): Plan[] {
    const seen = new Set<string>();
    const claimed = new Map<string, string>();
    return routes.map((route) => {
      const rendered = renderRoute(route, this.#mode);
      if (this.#writer.drains && draining.get(route.applicationId)) rendered.draining = true;
      const outcome: RouteOutcome = {
        applicationId: route.applicationId,
        status: "synced",
        signatureHash: routeSignature(route, this.#mode),
        fqdns: rendered.fqdns,
        upstream: upstreamFor(route, this.#mode),
      };
      let problem = routeProblem(route);
      if (problem === undefined && seen.has(route.applicationId)) problem = "the application appears twice";
      const taken = rendered.fqdns.find((f) => claimed.has(f));
      if (problem === undefined && taken !== undefined) {
        problem = `domain name '${taken}' is also asked for by application ${claimed.get(taken)}`;
      }
      seen.add(route.applicationId);
      if (problem !== undefined)
        return { route, rendered, outcome: { ...outcome, status: "failed", error: problem }, write: false };
      for (const f of rendered.fqdns) claimed.set(f, route.applicationId);
      return { route, rendered, outcome, write: true };
    });
  }

  #classify(p: Plan, live: LiveRoute | undefined): void {
    const serving = live?.pristine === true && sameRoute(live, p.rendered);
    const entry = this.#ledger.get(p.route.applicationId);
    const sameSignature = entry?.signatureHash === p.outcome.signatureHash;
    // A drain change is a change we asked for, not drift.
    const drainChanged = (entry?.draining ?? false) !== (p.rendered.draining ?? false);
    if (sameSignature && !drainChanged) p.outcome.status = serving ? "noop" : "drift_recovered";
    // A new signature the proxy already serves as we would write it (the ledger was lost, or only
    // the image tag changed): recorded as synced without touching the proxy.
    p.write = !serving;
  }

  #removals(req: SyncRequest, plans: Plan[], valid: Plan[], live: Map<string, LiveRoute>): string[] {
    const requested = new Set(plans.map((p) => p.route.applicationId));
    const out = new Set<string>();
    for (const id of req.remove ?? []) out.add(id);
    if (req.knownApplicationIds !== undefined) {
      const known = new Set(req.knownApplicationIds);
      for (const id of [...this.#ledger.ids(), ...live.keys()]) if (!known.has(id)) out.add(id);
    }
    const claimed = new Set(valid.flatMap((p) => p.rendered.fqdns));
    for (const [id, route] of live) if (route.fqdns.some((f) => claimed.has(f))) out.add(id);
    // A route asked for in this request is never removed by it; ids that are not ids never reach a writer.
    return [...out].filter((id) => !requested.has(id) && validApplicationId(id)).sort();
  }

  async #record(valid: Plan[], removed: string[], draining: Map<string, boolean>): Promise<void> {
    const drainOf = (id: string) => draining.get(id) ?? this.#ledger.get(id)?.draining === true;
    const changed = valid.filter(
      (p) =>
        p.outcome.status !== "noop" ||
        drainOf(p.route.applicationId) !== (this.#ledger.get(p.route.applicationId)?.draining === true),
    );
    if (changed.length === 0 && removed.length === 0) return;
    const appliedAt = Date.now();
    for (const { route, rendered, outcome } of changed) {
      const { containerName, containerPort, imageTag } = route;
      this.#ledger.set({
        applicationId: route.applicationId,
        signatureHash: outcome.signatureHash,
        fqdns: rendered.fqdns,
        upstream: rendered.upstream,
        containerName,
        containerPort,
        imageTag,
        appliedAt,
        ...(drainOf(route.applicationId) ? { draining: true } : {}),
      });
    }
    for (const id of removed) this.#ledger.delete(id);
    // The proxy has the change already; a ledger that cannot be saved must be loud, not silent.
    await this.#ledger.save();
  }
}

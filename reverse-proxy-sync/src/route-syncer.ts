// Reconciles desired routes with the route ledger and the live proxy, and
// decides per route: noop, synced, drift_recovered or failed. It also removes
// routes that must not stay: applications that no longer exist, explicit
// removals, and another application's route claiming a domain asked for here
// (two competing routes for one domain is a known Dokploy bug). Everything goes
// to the writer as one apply, so the proxy takes a request whole or not at all.
import type { RouteLedger } from "./ledger.js";
import { type LiveRoute, ProxyChangedError, type RouteWriter } from "./route-writer.js";
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

/** Writes a turn tries when someone else keeps changing the proxy between its read and its write. */
const CHANGED_ATTEMPTS = 3;

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export class RouteSyncer {
  readonly #writer: RouteWriter;
  readonly #ledger: RouteLedger;
  readonly #mode: UpstreamMode;
  #queue: Promise<unknown> = Promise.resolve();
  /** The ledger's saves, in order; never rejects (a failure is kept in #saveFailed). */
  #saving: Promise<void> = Promise.resolve();
  /** A save queued behind the one in flight: it writes the newest entries, so later turns share it. */
  #saveQueued: Promise<void> | undefined;
  #saveFailed: unknown;

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
   * The proxy's read beside the request's making, or the writer's view of it as
   * it last read or wrote it (RouteWriter.known: no read at all). Both are
   * settled before the turn ends, so a read of a failed turn cannot land after
   * the next turn's read (the Caddy writer keeps its last read for apply).
   */
  async #readThenSync(pending: Promise<SyncRequest>): Promise<SyncReport> {
    const known = this.#writer.known?.();
    const [asked, read] = await Promise.allSettled([pending, known ?? this.#writer.readAll()]);
    if (asked.status === "rejected") throw asked.reason;
    return this.#sync(asked.value, read, known !== undefined ? "guessed" : "read");
  }

  /** The proxy read again: a guess that cannot be confirmed, or one someone else's write made stale. */
  async #readAgain(req: SyncRequest, attempt: number): Promise<SyncReport> {
    const [read] = await Promise.allSettled([this.#writer.readAll()]);
    return this.#sync(req, read!, "read", attempt + 1);
  }

  /**
   * `live`: "guessed" when the routes are the writer's own view, never read: only a
   * write confirms them (a conditional one), so a turn that would write nothing
   * reads the proxy first, and one whose write finds the proxy changed (by someone
   * else: ProxyChangedError) reads and plans again.
   */
  async #sync(
    req: SyncRequest,
    read: PromiseSettledResult<Map<string, LiveRoute>>,
    live: "guessed" | "read",
    attempt = 0,
  ): Promise<SyncReport> {
    const draining = this.#drainState(req);
    const asked = new Set(req.routes.map((r) => r.applicationId));
    const served = read.status === "fulfilled" ? read.value : new Map<string, LiveRoute>();
    const plans = this.#plan([...req.routes, ...this.#fromLedger(draining, asked, served)], draining);
    const valid = plans.filter((p) => p.outcome.status !== "failed");
    if (read.status === "rejected") {
      const why = `could not read the ${this.#writer.kind} proxy: ${message(read.reason)}`;
      for (const p of valid) Object.assign(p.outcome, { status: "failed", error: why });
      return { routes: plans.map((p) => p.outcome), removed: [] };
    }
    for (const p of valid) this.#classify(p, served.get(p.route.applicationId));
    const removals = this.#removals(req, plans, valid, served);
    const upsert = valid.filter((p) => p.write).map((p) => p.rendered);
    const writes = upsert.length > 0 || removals.some((id) => served.has(id));
    if (live === "guessed" && !writes) return this.#readAgain(req, attempt);
    if (writes) {
      try {
        await this.#writer.apply({ upsert, remove: removals });
      } catch (err) {
        if (err instanceof ProxyChangedError && attempt < CHANGED_ATTEMPTS)
          return this.#readAgain(req, attempt);
        for (const p of valid)
          if (p.write) Object.assign(p.outcome, { status: "failed", error: message(err) });
        return { routes: plans.map((p) => p.outcome), removed: [] };
      }
    }
    const removed = removals.filter((id) => served.has(id) || this.#ledger.get(id) !== undefined);
    await this.#record(valid, removed, draining);
    return { routes: plans.map((p) => p.outcome), removed };
  }

  /**
   * A drain change of a route not asked for rewrites it as it is served: as the
   * proxy holds it when that is our own shape (pristine), else as the ledger last
   * applied it. The proxy first, because the ledger file may be a save behind
   * the proxy after a crash (#record): its upstream may be an older port.
   */
  #fromLedger(draining: Map<string, boolean>, asked: Set<string>, served: Map<string, LiveRoute>) {
    return [...draining.keys()]
      .filter((id) => !asked.has(id))
      .flatMap((id): DesiredRoute[] => {
        const e = this.#ledger.get(id);
        if (e === undefined) return [];
        const { applicationId, containerName, containerPort, imageTag } = e;
        const live = served.get(id);
        const { fqdns, upstream } = live?.pristine ? live : e;
        return [{ applicationId, containerName, containerPort, imageTag, fqdns, upstream }];
      });
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

  /**
   * Records the turn in the ledger and saves it. The save is off the answer's
   * path unless the turn changed a drain state or removed a route, or the last
   * save failed. Why a crash still cannot make the ledger claim what the proxy
   * was not given:
   * - the ledger in memory changes only here, after the proxy took the change
   *   (apply returned), and a save writes it as it is when the save runs; saves
   *   run one at a time, in order. So the file always holds the ledger as of a
   *   turn whose write the proxy had taken: after a crash it may be behind the
   *   proxy, never ahead of it. (A crash between the apply and an awaited save
   *   left the same states before; only the answer may now precede the save.)
   * - a ledger behind the proxy costs a route's status only (synced where noop
   *   would do: what to write is decided on the live proxy, never the ledger)
   *   and a removal made again. What a later write takes from the ledger is
   *   saved before the answer (drain states, removals), and the route a drain
   *   change rewrites is taken from the proxy when it serves our own shape
   *   (#fromLedger), so a file a save behind cannot bring an older port back.
   * route-syncer.test.ts restarts a syncer on a file a save behind, and checks both.
   */
  async #record(valid: Plan[], removed: string[], draining: Map<string, boolean>): Promise<void> {
    const drainOf = (id: string) => draining.get(id) ?? this.#ledger.get(id)?.draining === true;
    const drainChanged = (id: string) => drainOf(id) !== (this.#ledger.get(id)?.draining === true);
    const changed = valid.filter((p) => p.outcome.status !== "noop" || drainChanged(p.route.applicationId));
    if (changed.length === 0 && removed.length === 0) return;
    const before = removed.length > 0 || changed.some((p) => drainChanged(p.route.applicationId));
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
    // The proxy has the change already; a ledger that cannot be saved must be loud, not silent:
    // a failed save makes the next turn save before its answer, and fail if it fails again.
    const save = this.#save();
    if (before || this.#saveFailed !== undefined) await save;
  }

  /** A save of the ledger after the ones started before; one queued behind those is shared. */
  #save(): Promise<void> {
    if (this.#saveQueued) return this.#saveQueued;
    const run = this.#saving.then(() => {
      this.#saveQueued = undefined; // from here a change needs a save of its own
      return this.#ledger.save();
    });
    this.#saveQueued = run;
    this.#saving = run.then(
      () => {
        this.#saveFailed = undefined;
      },
      (err: unknown) => {
        this.#saveFailed = err ?? new Error("the route ledger could not be saved");
      },
    );
    return run;
  }

  /** Resolves once every ledger save started so far has ended; rejects with the last one's error. */
  async settled(): Promise<void> {
    await this.#saving;
    if (this.#saveFailed !== undefined) throw this.#saveFailed;
  }
}

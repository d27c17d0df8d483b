// A live view of the engine's containers (name, state, ports), so a route sync's
// port check (jobs/port-check.ts) does not list every container at each sync
// (podman's list of 100 containers: 44–118 ms here; bench/README.md, route-sync).
// Built from one list, then kept by the engine's container event stream on the
// API socket (engine-events.ts): every event but the few that change nothing
// makes the view inspect that one container by id again; a remove drops it.
// Keyed by container id, with a name index (events carry ids).
//
// The rule that keeps a stale view from routing to a wrong port: the view
// answers a sync only once it has caught up with the engine. Before each sync it
// asks the engine, in one call, for every container event since the last one it
// applied (`GET /events` with `since`, ending at now) and applies what the
// stream had not delivered yet, waiting for the inspects that concern the
// containers the sync names (below). The engine records
// an event before the call that caused it returns (podman writes its events log
// before `podman rm` exits: seen 4 ms before; docker publishes it in memory), so
// a container removed and one created under its name before the sync began are
// both in the view when its ports are read: a hit is as current as today's list.
// The stream alone could not promise that: podman tails its events log, and
// delivered them 1–60 ms after the CLI returned in a try here.
// A miss in the view (unknown name, port not found, not running) is never a
// refusal by itself: the port check asks the engine (inspect) about those routes.
// So an event makes the view forget that container's facts at once, and a
// catch-up waits only for the inspects of the containers its sync names (by the
// event's name, or the name the view had): another container's change, however
// slow the engine is to answer about it, is a miss meanwhile, never its old facts.
// The catch-up reads `since` 2 s before the last event applied (two podman
// processes may write their events out of time order), and repeats are told
// apart by time, id and action.
//
// On podman with the `file` events logger, the catch-up reads that file itself
// from where the last one stopped (events-file.ts), a few hundred µs instead of
// podman's read of its whole log per `since` query, once the file is proven to be
// the one the engine's API reads: an API catch-up answered the file's last event.
// A file replaced or truncated since (podman's rotation) is never read across:
// that sync takes the API's catch-up, which proves the file again.
//
// Resync (the stream opened again, and one full list): when the stream ends (the
// engine restarted or went away), when a catch-up or an inspect fails, and when a
// catch-up returns so many events that the engine may have dropped some (docker
// keeps the last 256 in memory). A view that cannot resync answers nothing and
// the port check does as it does without one.
import { type ContainerFacts, parseInspect } from "./container-facts.js";
import type { EngineApi, ListFlavour } from "./engine-api.js";
import { EventsFileTail } from "./events-file.js";
import {
  type ContainerEvent,
  EVENTS_STREAM_PATH,
  LineSplitter,
  UNCHANGING_ACTIONS,
  catchUpPath,
  parseEvent,
} from "./engine-events.js";

const DEADLINE_SECONDS = 15;
/** How far before the last event applied a catch-up reads (events written out of time order). */
const CATCH_UP_MARGIN_NS = 2_000_000_000n;
/** Event keys kept to tell repeats apart: longer than the margin. */
const KEPT_KEYS_NS = 10_000_000_000n;
/** A catch-up this long may have lost events off docker's in-memory buffer (256): resync. */
const MAX_CATCH_UP_EVENTS = 250;

/** What the view did, for the tests and the bench. */
export interface ContainerViewStats {
  /** Full lists: the first build and every resync. */
  lists: number;
  /** Catch-ups asked of the engine's API (`GET /events` since). */
  catchUps: number;
  /** Catch-ups read from podman's events file (no engine call). */
  fileCatchUps: number;
  /** One-container inspects after events. */
  inspects: number;
}

export class ContainerView {
  readonly stats: ContainerViewStats = { lists: 0, catchUps: 0, fileCatchUps: 0, inspects: 0 };
  #live = false;
  #broken = false;
  #flavour: ListFlavour = "docker";
  #closeStream: (() => void) | undefined;
  readonly #byId = new Map<string, ContainerFacts>();
  readonly #byName = new Map<string, Set<string>>();
  /** The event sequence number whose inspect may still change an id (older answers are dropped). */
  readonly #gen = new Map<string, number>();
  #seq = 0;
  /** Inspects in flight, each with the names it may change (the event's, the view's before); undefined: unknown. */
  readonly #pending = new Map<Promise<void>, string[] | undefined>();
  readonly #applied = new Map<string, bigint>();
  #lastNano = 0n;
  /** Ids an event touched while the build's list was being read: the list's entry is older. */
  #touched: Set<string> | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  /** Podman's events file, read by the catch-up while proven (undefined: the API's catch-up). */
  #tail: EventsFileTail | undefined;

  constructor(
    readonly api: EngineApi,
    /** Where podman's file events logger writes (events-file.ts podmanEventsLogPath), to prove and read. */
    readonly eventsLog?: string,
  ) {}

  /**
   * Brings the view up to the engine's present (a catch-up, or a build when it is
   * not live); false when it cannot, and must not be read for this sync.
   * Callers are served one at a time, each with its own catch-up. `names`: the
   * containers the caller will look up; other containers' inspects are not waited for.
   */
  current(names?: Iterable<string>): Promise<boolean> {
    const wanted = names === undefined ? undefined : new Set(names);
    const next = this.#queue.then(() => this.#ready(wanted));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /** The container now named `name`; undefined when unknown (or two ids claim it mid-change). */
  lookup(name: string): ContainerFacts | undefined {
    const ids = this.#byName.get(name);
    if (ids === undefined || ids.size !== 1) return undefined;
    return this.#byId.get([...ids][0]!);
  }

  close(): void {
    this.#teardown();
  }

  async #ready(wanted: ReadonlySet<string> | undefined): Promise<boolean> {
    if (this.#live && !this.#broken && (await this.#catchUp(wanted))) return true;
    return this.#build();
  }

  async #build(): Promise<boolean> {
    this.#teardown();
    try {
      // Which catch-up the engine understands: podman's answers carry its API version.
      const ping = await this.api.get("/_ping", DEADLINE_SECONDS * 1000);
      this.#flavour = ping.headers["libpod-api-version"] === undefined ? "docker" : "libpod";
      const since = BigInt(Date.now()) * 1_000_000n - CATCH_UP_MARGIN_NS;
      // The stream first: a change during the list is then in the stream too.
      await this.#openStream();
      this.#touched = new Set();
      this.stats.lists++;
      const listed = await this.api.list(DEADLINE_SECONDS);
      if (listed === undefined) throw new Error("the engine did not list its containers");
      for (const facts of listed.values()) {
        if (facts.id !== undefined && !this.#touched.has(facts.id)) this.#put(facts.id, facts);
      }
      this.#touched = undefined;
      if (since > this.#lastNano) this.#lastNano = since;
      this.#live = true;
      await this.#settle();
      // On podman's events file: one API catch-up now proves it, so the next sync reads it.
      if (this.#provable()) return await this.#catchUp(undefined);
      return this.#live && !this.#broken;
    } catch {
      this.#teardown();
      return false;
    }
  }

  async #openStream(): Promise<void> {
    const { res, close } = await this.api.stream(EVENTS_STREAM_PATH, DEADLINE_SECONDS * 1000);
    this.#closeStream = close;
    if (res.statusCode !== 200) {
      res.resume();
      throw new Error(`GET /events: HTTP ${res.statusCode}`);
    }
    const lines = new LineSplitter();
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      if (this.#closeStream !== close) return;
      for (const line of lines.push(chunk)) {
        const event = parseEvent(line);
        if (event) this.#apply(event);
      }
    });
    // The engine restarted or went away: what it did meanwhile is unknown, so the next sync resyncs.
    const ended = () => {
      if (this.#closeStream === close) this.#live = false;
    };
    res.on("end", ended);
    res.on("close", ended);
    res.on("error", ended);
  }

  #provable(): boolean {
    return this.#flavour === "libpod" && this.eventsLog !== undefined;
  }

  async #catchUp(wanted: ReadonlySet<string> | undefined): Promise<boolean> {
    const events = (await this.#fileEvents()) ?? (await this.#apiEvents());
    if (events === undefined) return false;
    for (const e of events) this.#apply(e);
    await this.#settle(wanted);
    this.#forgetOldKeys();
    return this.#live && !this.#broken;
  }

  /** What podman's proven events file gained since the last read; undefined when there is none to read. */
  async #fileEvents(): Promise<ContainerEvent[] | undefined> {
    const events = await this.#tail?.read().catch(() => undefined);
    if (events === undefined) {
      this.#tail = undefined;
      return undefined;
    }
    this.stats.fileCatchUps++;
    return events;
  }

  /**
   * The API's catch-up; on podman's events file, anchored at that file's end
   * first, which becomes the catch-up's once the API's answer holds the file's
   * last event (the same ns, id and action: the API reads this file).
   */
  async #apiEvents(): Promise<ContainerEvent[] | undefined> {
    this.stats.catchUps++;
    const tail = this.#provable() ? new EventsFileTail(this.eventsLog!) : undefined;
    const last = await tail?.anchor().catch(() => undefined);
    let since = this.#lastNano - CATCH_UP_MARGIN_NS;
    if (last !== undefined && last.timeNano - 1n < since) since = last.timeNano - 1n;
    let body: string;
    try {
      const answer = await this.api.get(
        catchUpPath(this.#flavour, since, Date.now() + 1),
        DEADLINE_SECONDS * 1000,
      );
      if (answer.status !== 200) return undefined;
      body = answer.body;
    } catch {
      return undefined;
    }
    const events = body.split("\n").flatMap((l) => parseEvent(l) ?? []);
    if (events.length >= MAX_CATCH_UP_EVENTS) return undefined;
    if (last !== undefined && events.some((e) => e.key === last.key)) this.#tail = tail;
    return events;
  }

  /** Keys older than any catch-up reads again; also between syncs, so a long quiet stream stays small. */
  #forgetOldKeys(): void {
    const oldest = this.#lastNano - KEPT_KEYS_NS;
    for (const [key, t] of this.#applied) if (t < oldest) this.#applied.delete(key);
  }

  #apply(e: ContainerEvent): void {
    if (this.#applied.has(e.key)) return;
    this.#applied.set(e.key, e.timeNano);
    if (this.#applied.size % 1000 === 0) this.#forgetOldKeys();
    if (e.timeNano > this.#lastNano) this.#lastNano = e.timeNano;
    if (UNCHANGING_ACTIONS.has(e.action)) return;
    this.#touched?.add(e.id);
    const gen = ++this.#seq;
    this.#gen.set(e.id, gen);
    const before = this.#byId.get(e.id)?.name;
    if (e.action === "remove" || e.action === "destroy") {
      this.#drop(e.id);
      return;
    }
    // Not served again until the inspect answers: a lookup meanwhile is a miss the engine answers.
    this.#forget(e.id);
    const p = this.#refresh(e.id, gen).finally(() => this.#pending.delete(p));
    this.#pending.set(
      p,
      e.name === undefined ? undefined : [e.name, ...(before === undefined ? [] : [before])],
    );
  }

  /** The container as the engine shows it now, unless a later event asked again meanwhile. */
  async #refresh(id: string, gen: number): Promise<void> {
    this.stats.inspects++;
    const o = await this.api.inspect([id], DEADLINE_SECONDS);
    if (this.#gen.get(id) !== gen) return;
    if (o.status !== "completed") {
      this.#broken = true;
      return;
    }
    const facts = [...parseInspect(o.stdout).values()].find((f) => f.id === id);
    if (facts !== undefined) this.#put(id, facts);
    else if (o.exitCode !== 0 && /no such/i.test(o.stderr)) this.#drop(id);
    else this.#broken = true;
  }

  /** Waits for the inspects in flight that may change a name in `wanted` (all of them when undefined). */
  async #settle(wanted?: ReadonlySet<string>): Promise<void> {
    const waited = (names: string[] | undefined) =>
      wanted === undefined || names === undefined || names.some((n) => wanted.has(n));
    for (;;) {
      const waits = [...this.#pending].filter(([, names]) => waited(names)).map(([p]) => p);
      if (waits.length === 0) return;
      await Promise.all(waits);
    }
  }

  #put(id: string, facts: ContainerFacts): void {
    this.#unindex(id);
    this.#byId.set(id, facts);
    const ids = this.#byName.get(facts.name) ?? new Set<string>();
    ids.add(id);
    this.#byName.set(facts.name, ids);
  }

  #drop(id: string): void {
    this.#forget(id);
    this.#gen.delete(id);
  }

  #forget(id: string): void {
    this.#unindex(id);
    this.#byId.delete(id);
  }

  #unindex(id: string): void {
    const before = this.#byId.get(id);
    if (before === undefined) return;
    const ids = this.#byName.get(before.name);
    ids?.delete(id);
    if (ids?.size === 0) this.#byName.delete(before.name);
  }

  #teardown(): void {
    this.#tail = undefined;
    this.#closeStream?.();
    this.#closeStream = undefined;
    this.#live = false;
    this.#broken = false;
    this.#touched = undefined;
    this.#byId.clear();
    this.#byName.clear();
    this.#gen.clear();
    this.#applied.clear();
  }
}

// Watches the containers the agent deployed and emits ("change") each
// application's container state when any of it changes; the gateway stream
// sends it (ContainerReport) after Welcome and on every change.
//
// A poll, not the engine's event stream: one `ps -a --filter label=...` every
// interval (plus one `container inspect` when there are deployed containers)
// costs one short CLI call on a machine with nothing deployed, survives an
// engine restart or replacement without a stream to re-open, and reads the same
// on docker and podman. What a poll cannot miss is counted for it: a crash the
// engine restarted between two looks shows as its RestartCount going up
// (crash-tracker.ts). What it loses is the exit code of such a crash (podman
// resets it when the container runs again).
import { EventEmitter } from "node:events";
import type { ApplicationContainer } from "@relayctl/proto";
import { APPLICATION_LABEL } from "../deploy/naming.js";
import type { ContainerEngine } from "../engine/engine.js";
import type { Logger } from "../log.js";
import { CrashHolds } from "./crash-hold.js";
import { CrashTracker } from "./crash-tracker.js";
import { DiedEvents } from "./died-events.js";
import { type ContainerRuntime, liveContainers, parseRuntime } from "./runtime.js";

const CALL_DEADLINE_SECONDS = 30;

export interface ContainerWatcherOptions {
  /** The engine to ask, or undefined while the agent has no working one (nothing is polled). */
  engine: () => ContainerEngine | undefined;
  log: Logger;
  /** Poll period (ms); 0: the first look only. @default 5000 */
  intervalMs?: number;
  /** Runs once, on the first successful look (containers/boot-start.ts). */
  onFirstLook?: (engine: ContainerEngine, containers: ContainerRuntime[]) => Promise<boolean>;
  /** @default Date.now */
  now?: () => number;
  /**
   * Podman's crashed containers started again by the agent, a crash loop's after its hold
   * (crash-hold.ts), holds kept in `stateDir`; `firstHoldSeconds` 0: no holds, every crash
   * started again at once. @default none: no restarts by the agent
   */
  crashHold?: { stateDir: string; firstHoldSeconds: number; serverId?: string };
}

export class ContainerWatcher extends EventEmitter<{ change: [report: ApplicationContainer[]] }> {
  readonly #tracker = new CrashTracker();
  readonly #holds: CrashHolds | undefined;
  /** Podman's died events, while the agent restarts its crashed containers (died-events.ts). */
  #died: DiedEvents | undefined;
  #again = false;
  #stopped = false;
  #current: ApplicationContainer[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  #polling: Promise<void> | undefined;
  #firstLookDone = false;

  constructor(readonly options: ContainerWatcherOptions) {
    super();
    const hold = options.crashHold;
    if (hold)
      this.#holds = new CrashHolds({
        stateDir: hold.stateDir,
        log: options.log,
        firstHoldMs: hold.firstHoldSeconds * 1000,
        serverId: hold.serverId,
        now: options.now,
        // A look in flight may have begun before the hold was over: look again after it.
        onDue: () => this.#lookAgain(),
      });
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#stopped = false;
    void this.poll();
    const every = this.options.intervalMs ?? 5000;
    if (every === 0) return;
    this.#timer = setInterval(() => void this.poll(), every);
    this.#timer.unref(); // never what keeps the agent alive
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#holds?.stop();
    this.#stopped = true; // a look still in flight starts no follower
    this.#died?.stop();
    this.#died = undefined;
  }

  /** Looks once more after the look in flight, or now; one such look waits at most. */
  #lookAgain(): void {
    if (this.#again) return;
    this.#again = true;
    void (this.#polling ?? Promise.resolve()).then(() => {
      this.#again = false;
      return this.poll();
    });
  }

  /** The last look's report; undefined until one succeeded. */
  get current(): ApplicationContainer[] | undefined {
    return this.#current;
  }

  /** Looks now; a look already running is shared. */
  poll(): Promise<void> {
    this.#polling ??= this.#look()
      .catch((err) => this.options.log.warn({ err }, "container watch failed"))
      .finally(() => {
        this.#polling = undefined;
      });
    return this.#polling;
  }

  async #look(): Promise<void> {
    const engine = this.options.engine();
    if (engine === undefined) return;
    // Only with looks every interval: an agent with them off restarts nothing (podman's policy does).
    if (engine.name === "podman" && this.#holds && (this.options.intervalMs ?? 5000) > 0 && !this.#stopped) {
      this.#died ??= new DiedEvents(engine.name, () => this.#lookAgain(), this.options.log);
      this.#died.start();
    }
    // Held containers whose hold is over start first, so this look reads them after it.
    for (const app of (await this.#holds?.releaseDue(engine)) ?? []) this.#tracker.started(app);
    let all = await this.#containers(engine);
    if (all === undefined) return;
    if (!this.#firstLookDone) {
      this.#firstLookDone = true;
      if (await this.options.onFirstLook?.(engine, all)) all = (await this.#containers(engine)) ?? all;
    }
    const now = () => (this.options.now ?? Date.now)();
    let report = this.#tracker.observe(liveContainers(all), now());
    const started = (await this.#holds?.afterLook(engine, all, report)) ?? [];
    if (started.length > 0) {
      // Crashed containers started again: reported as they are now, their restarts counted.
      for (const app of started) this.#tracker.started(app);
      all = (await this.#containers(engine)) ?? all;
      report = this.#tracker.observe(liveContainers(all), now());
    }
    const holds = this.#holds;
    if (holds) for (const r of report) r.heldUntilUnixMs = holds.heldUntil(r.applicationId);
    if (JSON.stringify(report) === JSON.stringify(this.#current)) return;
    this.#current = report;
    this.emit("change", report);
  }

  /** Every labelled container, or undefined when the engine did not answer. */
  async #containers(engine: ContainerEngine): Promise<ContainerRuntime[] | undefined> {
    const opts = { deadlineSeconds: CALL_DEADLINE_SECONDS };
    const ps = await engine.containersWithLabel(APPLICATION_LABEL, opts);
    if (ps.status !== "completed" || ps.exitCode !== 0) return undefined;
    const names = ps.stdout
      .split("\n")
      .map((n) => n.trim())
      .filter(Boolean);
    if (names.length === 0) return [];
    // A container removed between the two calls makes inspect exit non-zero; the others are still printed.
    const inspected = await engine.inspect(names, CALL_DEADLINE_SECONDS);
    if (inspected.status !== "completed") return undefined;
    return parseRuntime(inspected.stdout);
  }
}

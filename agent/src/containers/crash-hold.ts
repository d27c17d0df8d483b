// Podman's crashed containers are brought back by the agent, not by podman's restart
// policy (deploy/start-step.ts says why: podman 4 restarts at once and for ever, and
// its restarts lose the published port's reservation and can leave a dead container's
// DNAT rules behind). After each look of the watcher (every 5 s, and at once when
// podman says a container died: died-events.ts), a live container
// that exited by a crash (not a stop: crash-tracker.ts) is started again at once; once
// its application is in a crash loop (3 crashes within 5 minutes), it is left down for
// a hold first: 10 s, then twice as long at each hold of the same loop, at most 5 min.
// The holds of a loop end once its container has run for a minute without crashing;
// the next loop starts at 10 s again. A hold ends with its container (a deployment that
// switched retires it; a delete removes it). Holds are written to the state dir, so an
// agent that restarts during one still starts the container when it ends. Containers
// started with a restart policy (docker's, or podman's before this agent) are the
// engine's to restart; a deployment's new container is left alone until it is switched
// to (deploy/in-flight.ts), so its health check sees it crash.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type ApplicationContainer, ContainerState } from "@relayctl/proto";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";
import type { ContainerEngine } from "../engine/engine.js";
import { inFlightContainers } from "../deploy/in-flight.js";
import type { Logger } from "../log.js";
import { crashedExit } from "./crash-tracker.js";
import { type ContainerRuntime, liveContainers } from "./runtime.js";

const FILE = "crash-holds.json";
const CALL_DEADLINE_SECONDS = 60;
/** A container that ran this long since its last start without crashing ends its loop's holds. */
export const STABLE_MS = 60_000;
export const FIRST_HOLD_MS = 10_000;
export const MAX_HOLD_MS = 5 * 60_000;
/** A start after a hold that failed is tried again this much later. */
const RETRY_MS = 5_000;

/** The hold before the `level`-th restart of a loop (0 first): doubling from `firstMs`, at most `maxMs`. */
export function holdMs(level: number, firstMs = FIRST_HOLD_MS, maxMs = MAX_HOLD_MS): number {
  return Math.min(maxMs, firstMs * 2 ** Math.min(level, 30));
}

interface Hold {
  container: string;
  /** Holds of this loop so far. */
  level: number;
  /** Unix ms the container is started again; 0 once it was (the level stays for the loop's next hold). */
  until: number;
}

export interface CrashHoldOptions {
  stateDir: string;
  log: Logger;
  /** Called when a hold is over: the watcher looks, and its look starts the container (releaseDue). */
  onDue: () => void;
  /**
   * This agent's server: another server's containers on the same engine (agents sharing a
   * machine) are their agent's to restart. @default every container
   */
  serverId?: string;
  /** @default FIRST_HOLD_MS; 0: no holds, a crashed container is always started again at once. */
  firstHoldMs?: number;
  /** @default MAX_HOLD_MS */
  maxHoldMs?: number;
  now?: () => number;
}

export class CrashHolds {
  #holds: Map<string, Hold> | undefined;
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(readonly o: CrashHoldOptions) {}

  #now(): number {
    return (this.o.now ?? Date.now)();
  }

  /**
   * After each look (`all`: every labelled container; `report`: the live ones' states): starts
   * again the live containers that crashed, or holds them when their application is in a crash
   * loop; drops the holds of containers that are gone or ran a minute. The applications whose
   * container it started, for the crash tracker.
   */
  async afterLook(
    engine: ContainerEngine,
    all: ContainerRuntime[],
    report: ApplicationContainer[],
  ): Promise<string[]> {
    if (engine.name !== "podman") return [];
    const holds = await this.#load();
    const byName = new Map(all.map((c) => [c.name, c]));
    const now = this.#now();
    let changed = false;
    for (const [app, h] of holds) {
      // Removed: the application deleted, or retired by a deployment that switched. A container
      // that is only not the live one any more is kept held: a deployment whose new container
      // fails leaves it the live one again.
      const c = byName.get(h.container);
      const settled = h.until === 0 && c?.status === "running" && now - c.startedAt >= STABLE_MS;
      if (c === undefined || settled) {
        holds.delete(app);
        this.#disarm(app);
        changed = true;
      }
    }
    const loops = new Set(
      report.filter((r) => r.state === ContainerState.CONTAINER_STATE_CRASH_LOOP).map((r) => r.applicationId),
    );
    const started: string[] = [];
    for (const [app, c] of liveContainers(all)) {
      if (!this.#restartable(c)) continue;
      const h = holds.get(app);
      if (h?.container === c.name && h.until !== 0) continue; // held: releaseDue starts it
      const fields = { container: c.name, application_id: app, exit_code: c.exitCode };
      const firstMs = this.o.firstHoldMs ?? FIRST_HOLD_MS;
      if (loops.has(app) && firstMs > 0) {
        const level = h?.container === c.name ? h.level : 0;
        const ms = holdMs(level, firstMs, this.o.maxHoldMs);
        // From now, not the look's start: a start of another application's container above can
        // take seconds on a loaded machine, and the container stays down the whole hold.
        holds.set(app, { container: c.name, level: level + 1, until: this.#now() + ms });
        changed = true;
        this.o.log.warn(
          { ...fields, hold_seconds: ms / 1000 },
          "crash loop: container left down, started again after its hold",
        );
        continue;
      }
      if (await this.#start(engine, c.name, fields)) started.push(app);
    }
    if (changed) await this.#save();
    for (const [app, h] of holds) if (h.until !== 0) this.#arm(app, h);
    return started;
  }

  /** A live container of the agent's to bring back: it exited by a crash, and no one else restarts it. */
  #restartable(c: ContainerRuntime): boolean {
    if (c.restartPolicy !== "" && c.restartPolicy !== "no") return false; // the engine's
    if (this.o.serverId && c.serverId && c.serverId !== this.o.serverId) return false; // another agent's
    if (inFlightContainers.has(c.name)) return false; // its deployment's health check decides
    if (c.status !== "exited" && c.status !== "stopped") return false;
    return crashedExit(c);
  }

  async #start(
    engine: ContainerEngine,
    container: string,
    fields: Record<string, unknown>,
  ): Promise<boolean> {
    const out = await engine.start(container, { deadlineSeconds: CALL_DEADLINE_SECONDS });
    if (out.status === "completed" && out.exitCode === 0) {
      this.o.log.info(fields, "crashed container started again");
      return true;
    }
    this.o.log.warn(
      { ...fields, stderr: out.stderr.trim() },
      "cannot start the crashed container; tried again at the next look",
    );
    return false;
  }

  /**
   * Starts the containers whose hold is over (the watcher calls this at the start of a look, so
   * no look reads them half-way): the applications started, for the crash tracker.
   */
  async releaseDue(engine: ContainerEngine): Promise<string[]> {
    if (engine.name !== "podman") return [];
    const holds = await this.#load();
    const now = this.#now();
    const started: string[] = [];
    let changed = false;
    for (const [app, h] of holds) {
      if (h.until === 0 || h.until > now) continue;
      this.#disarm(app);
      const out = await engine.start(h.container, { deadlineSeconds: CALL_DEADLINE_SECONDS });
      const fields = { container: h.container, application_id: app };
      changed = true;
      if (out.status === "completed" && out.exitCode === 0) {
        h.until = 0;
        started.push(app);
        this.o.log.info(fields, "crash loop: hold over, container started again");
      } else {
        // Gone (deleted, redeployed: this look drops the hold) or the engine failing now: tried
        // again a little later, never left stopped for good.
        h.until = now + RETRY_MS;
        this.o.log.warn(
          { ...fields, stderr: out.stderr.trim(), retry_seconds: RETRY_MS / 1000 },
          "crash loop: cannot start the held container",
        );
      }
    }
    if (changed) await this.#save();
    return started;
  }

  /** Until when the application's container is held (Unix ms), 0 when it is not. */
  heldUntil(applicationId: string): number {
    return this.#holds?.get(applicationId)?.until ?? 0;
  }

  /** No timers left behind (the agent stops); the holds stay in their file. */
  stop(): void {
    for (const app of [...this.#timers.keys()]) this.#disarm(app);
  }

  #arm(app: string, h: Hold): void {
    if (this.#timers.has(app)) return;
    const timer = setTimeout(
      () => {
        this.#timers.delete(app);
        this.o.onDue();
      },
      Math.max(0, h.until - this.#now()),
    );
    timer.unref();
    this.#timers.set(app, timer);
  }

  #disarm(app: string): void {
    clearTimeout(this.#timers.get(app));
    this.#timers.delete(app);
  }

  async #load(): Promise<Map<string, Hold>> {
    if (this.#holds) return this.#holds;
    const holds = new Map<string, Hold>();
    const text = await readFile(join(this.o.stateDir, FILE), "utf8").catch(() => "");
    try {
      const doc = text ? (JSON.parse(text) as Record<string, Partial<Hold>>) : {};
      for (const [app, h] of Object.entries(doc)) {
        const int = (v: unknown): v is number => Number.isSafeInteger(v);
        if (typeof h?.container === "string" && int(h.level) && int(h.until))
          holds.set(app, { container: h.container, level: h.level, until: h.until });
      }
    } catch (err) {
      this.o.log.warn({ err }, "crash holds file unreadable; starting with none");
    }
    this.#holds ??= holds;
    return this.#holds;
  }

  async #save(): Promise<void> {
    const holds = await this.#load();
    await writeFileAtomic(
      join(this.o.stateDir, FILE),
      `${JSON.stringify(Object.fromEntries(holds))}\n`,
      0o600,
    );
  }
}

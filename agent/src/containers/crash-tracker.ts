// Turns successive looks at an application's live container into its reported
// state (agent.proto ApplicationContainer). Docker restarts a crashed app itself
// (--restart unless-stopped), often before the next look: a crash is seen as the
// engine's RestartCount going up, or as an exit the engine did not follow with a
// restart. On podman the agent restarts it (crash-hold.ts) and says so here
// (started()): its restarts count as the engine's would. Crashes are remembered per
// container; a new deployment's container starts with a clean slate.
import { type ApplicationContainer, ContainerState } from "@relayctl/proto";
import type { ContainerRuntime } from "./runtime.js";

/** A crash loop: this many crashes... */
export const CRASH_LOOP_COUNT = 3;
/** ...within this window. */
export const CRASH_LOOP_WINDOW_MS = 5 * 60_000;

/**
 * How a stop ends a process: exit 0, or SIGTERM's 143 (a stop's signal, forwarded by the
 * container's init). An exit with one of these is not a crash. A SIGKILL's 137 is: the OOM
 * killer, a `kill -9`, or a stop whose grace ran out, which nothing on podman tells apart.
 */
const STOP_EXITS = new Set([0, 143]);

/** Its last run ended in a crash: an exit a stop does not give. */
export function crashedExit(c: ContainerRuntime): boolean {
  return !STOP_EXITS.has(c.exitCode);
}

interface Track {
  containerName: string;
  restartCount: number;
  /** Starts by the agent after a crash (podman: crash-hold.ts), added to the engine's count. */
  agentRestarts: number;
  /** The exit (finishedAt) already counted, so one exit is one crash. */
  countedExitAt: number;
  /**
   * An exit counted while the engine had not restarted from it yet: the restart that
   * follows is that same crash, not another.
   */
  exitAwaitingRestart: boolean;
  crashes: number[];
  lastCrashAt: number;
}

export class CrashTracker {
  readonly #tracks = new Map<string, Track>();

  /**
   * The agent started the application's container again after a crash (crash-hold.ts): a
   * restart, counted; podman's `start` sets its own count back to 0, and the exit before it was
   * not restarted by the engine.
   */
  started(applicationId: string): void {
    const t = this.#tracks.get(applicationId);
    if (t === undefined) return;
    t.restartCount = 0;
    t.agentRestarts++;
    t.exitAwaitingRestart = false;
  }

  /** The state of each application's live container, seen at `now` (Unix ms). */
  observe(live: Map<string, ContainerRuntime>, now: number): ApplicationContainer[] {
    for (const id of this.#tracks.keys()) if (!live.has(id)) this.#tracks.delete(id);
    return [...live.values()]
      .sort((a, b) => a.applicationId.localeCompare(b.applicationId))
      .map((c) => this.#one(c, now));
  }

  #one(c: ContainerRuntime, now: number): ApplicationContainer {
    let t = this.#tracks.get(c.applicationId);
    if (t === undefined || t.containerName !== c.name) {
      // First sight (the agent started, or a new deployment): restarts from before are
      // history, dated by the last exit the engine recorded, and not a loop of this look.
      t = {
        containerName: c.name,
        restartCount: c.restartCount,
        agentRestarts: 0,
        countedExitAt: c.finishedAt,
        exitAwaitingRestart: false,
        crashes: [],
        lastCrashAt: c.restartCount > 0 ? c.finishedAt : 0,
      };
      this.#tracks.set(c.applicationId, t);
    }
    // A start by hand sets podman's count back to 0 too: a count below the last one is a new
    // run, its restarts all since then, and an exit it follows was not restarted by the engine.
    const reset = c.restartCount < t.restartCount;
    if (reset) t.exitAwaitingRestart = false;
    const restarts = reset ? c.restartCount : c.restartCount - t.restartCount;
    if (restarts > 0) {
      const fresh = restarts - (t.exitAwaitingRestart ? 1 : 0);
      t.exitAwaitingRestart = false;
      for (let i = 0; i < fresh; i++) t.crashes.push(now);
      t.lastCrashAt = c.finishedAt || now;
      t.countedExitAt = c.finishedAt;
    }
    t.restartCount = c.restartCount;
    const exited = !["running", "restarting", "stopping", "created", "configured"].includes(c.status);
    if (exited && c.finishedAt > t.countedExitAt && crashedExit(c)) {
      // An exit the engine did not (yet) restart from.
      t.crashes.push(now);
      t.lastCrashAt = c.finishedAt;
      t.countedExitAt = c.finishedAt;
      t.exitAwaitingRestart = true;
    }
    t.crashes = t.crashes.filter((at) => now - at < CRASH_LOOP_WINDOW_MS);
    return {
      applicationId: c.applicationId,
      containerName: c.name,
      state: stateOf(c, t.crashes.length >= CRASH_LOOP_COUNT),
      exitCode: exited || c.status === "restarting" ? c.exitCode : undefined,
      restartCount: c.restartCount + t.agentRestarts,
      lastCrashUnixMs: t.lastCrashAt,
      sinceUnixMs: c.status === "running" ? c.startedAt : c.finishedAt || c.createdAt,
      // Set by the watcher from its holds (crash-hold.ts).
      heldUntilUnixMs: 0,
    };
  }
}

function stateOf(c: ContainerRuntime, loop: boolean): ContainerState {
  if (loop) return ContainerState.CONTAINER_STATE_CRASH_LOOP;
  switch (c.status) {
    case "running":
      return ContainerState.CONTAINER_STATE_RUNNING;
    case "restarting":
    case "stopping":
      return ContainerState.CONTAINER_STATE_RESTARTING;
    case "created":
    case "configured":
      return ContainerState.CONTAINER_STATE_STOPPED;
    default:
      return crashedExit(c) ? ContainerState.CONTAINER_STATE_CRASHED : ContainerState.CONTAINER_STATE_STOPPED;
  }
}

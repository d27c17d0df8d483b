// Podman tells the agent when a container dies, so the watcher looks then instead of
// at its next interval: a crashed application is started again (crash-hold.ts) about
// as soon as podman's own restart policy did, not up to an interval (5 s) later. One
// long-lived `podman events --filter event=died` per agent. Podman 4.3 filters labels
// by key and value only, so any container's death makes a look; the look reads the
// deployed ones, and looks in a burst coalesce (watcher.ts). When the process ends
// (podman upgraded, its events log rotated) it is started again a second later; the
// interval's looks go on meanwhile, so nothing waits on it.
import { type ChildProcess, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import type { Logger } from "../log.js";

const RESPAWN_MS = 1000;

export class DiedEvents {
  #child: ChildProcess | undefined;
  #respawn: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    /** The engine's CLI (`podman`). */
    readonly binary: string,
    readonly onDied: () => void,
    readonly log: Logger,
  ) {}

  /** Follows the engine's events from now; a follower already running is kept. */
  start(): void {
    if (this.#child !== undefined || this.#respawn !== undefined || this.#stopped) return;
    const child = spawn(
      this.binary,
      ["events", "--format", "{{.ID}}", "--filter", "type=container", "--filter", "event=died"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.#child = child;
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", () => this.onDied());
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-2000);
    });
    const ended = (how: string) => {
      if (this.#child !== child) return;
      this.#child = undefined;
      if (this.#stopped) return;
      this.log.warn({ how, stderr: stderr.trim() }, "container died events ended; followed again in 1 s");
      this.#respawn = setTimeout(() => {
        this.#respawn = undefined;
        this.start();
      }, RESPAWN_MS);
      this.#respawn.unref();
    };
    child.on("error", (err) => ended(err.message));
    child.on("exit", (code, signal) => ended(signal ?? `exit ${code}`));
    // Never what keeps the agent alive.
    child.unref();
    (child.stdout as Readable & { unref?: () => void }).unref?.();
    (child.stderr as Readable & { unref?: () => void }).unref?.();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#respawn);
    this.#respawn = undefined;
    this.#child?.kill();
    this.#child = undefined;
  }
}

// Podman tells the agent when a container dies, so the watcher looks then instead of
// at its next interval: a crashed application is started again (crash-hold.ts) about
// as soon as podman's own restart policy did, not up to an interval (5 s) later. One
// long-lived `podman events --filter event=died` per agent. Podman 4.3 filters labels
// by key and value only, so each event prints its container's application label (a
// label is an event attribute) and only a deployed container's death makes a look;
// looks in a burst coalesce (watcher.ts). When the process ends
// (podman upgraded, its events log rotated) it is started again a second later; the
// interval's looks go on meanwhile, so nothing waits on it.
import { type ChildProcess, spawn } from "node:child_process";
import type { Readable } from "node:stream";
import { APPLICATION_LABEL } from "../deploy/naming.js";
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
      [
        "events",
        "--format",
        `{{index .Attributes "${APPLICATION_LABEL}"}}`,
        "--filter",
        "type=container",
        "--filter",
        "event=died",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.#child = child;
    let stderr = "";
    // One line per death: the application's id, empty for a container not deployed by relayctl.
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      if (chunk.split("\n").some((line) => line.trim() !== "")) this.onDied();
    });
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

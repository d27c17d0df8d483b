// The background loop every forge's stored deliveries are worked off by
// (github/processor.ts, forges/processor.ts): one step at a time per process,
// again at once while a step found work, else after a second or when nudged (a
// delivery was just recorded here), so deliveries recorded by another instance
// or before a restart are taken up too. One owner for the loop and for the
// words of a failed attempt, so both forges retry and give up alike.
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";

const IDLE_MS = 1000;

export class DeliveryLoop {
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(
    /** `github`, `forge`: names the log lines. */
    readonly name: string,
    readonly log: Logger,
    /** One unit of work; true when it found some (the loop goes on at once). */
    readonly step: () => Promise<boolean>,
  ) {}

  start(): void {
    this.#loop ??= this.#run();
  }

  /** A delivery was recorded: look now rather than at the next tick. */
  nudge(): void {
    this.#wake?.();
  }

  async close(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      let busy = false;
      try {
        busy = await this.step();
      } catch (err) {
        this.log.error({ err }, `${this.name} delivery processing failed`);
      }
      if (busy || this.#stop.signal.aborted) continue;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        sleep(IDLE_MS, undefined, { signal: this.#stop.signal }).then(resolve, resolve);
      });
      this.#wake = undefined;
    }
  }
}

/**
 * A delivery whose handling threw: logged, and the outcome to record — retried
 * later until `max` attempts, then given up.
 */
export function failedAttempt(
  log: Logger,
  name: string,
  d: { id: string; attempts: number | string },
  err: unknown,
  max: number,
): { last: boolean; outcome: { result: "error"; detail: string } } {
  const attempts = Number(d.attempts);
  const last = attempts >= max;
  log.warn(
    { err, delivery_id: d.id, attempt: attempts },
    last ? `${name} delivery failed; given up` : `${name} delivery failed; retried later`,
  );
  const detail = `processing failed (attempt ${attempts} of ${max}${last ? ", given up" : ", retried later"}): ${(err as Error).message}`;
  return { last, outcome: { result: "error", detail } };
}

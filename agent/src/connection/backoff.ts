// Reconnect delays: exponential with full jitter (a random delay between 0 and
// min(max, min·2^attempt)), so a gateway restart does not get every agent back
// in the same instant.

export class Backoff {
  #attempt = 0;

  constructor(
    readonly minMs: number,
    readonly maxMs: number,
    readonly random: () => number = Math.random,
  ) {}

  /** The delay before the next attempt. */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.minMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30); // 2^30·min is past any sane max; avoids Infinity
    return Math.floor(this.random() * ceiling);
  }

  /** A stream was established: start again from the smallest delays. */
  reset(): void {
    this.#attempt = 0;
  }
}

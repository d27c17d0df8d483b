// Reconnect delays. Two regimes, so that a fleet comes back fast from a gateway
// restart and still spreads out when the gateway stays away:
//
// - A young outage: the stream had been up a while (STABLE_STREAM_MS) and was lost
//   less than YOUNG_OUTAGE_MS ago. A restarted gateway is back in seconds (its
//   start, ~1-3 s), so delays use decorrelated jitter (each delay random between
//   min and 3 × the previous one) capped at YOUNG_CAP_MS: every agent tries again
//   within that cap of the gateway's return. With the old exponential schedule an
//   agent that had tried 5 times during a 3-s outage slept up to 8-15 s more
//   (agent-fanin measured 21.3 s for 10,000 agents to come back).
// - Otherwise (first connect, a long outage, a stream that keeps failing at
//   once): exponential with full jitter, a random delay between 0 and
//   min(max, min·2^attempt), so a long outage costs a gateway a few attempts per
//   agent per max, not one a second.
//
// The herd of a young outage is bounded by the fleet itself: each agent has one
// attempt at a time, and a refused TCP connect costs the gateway's host nothing
// but a RST. The gateway's side of the storm (its handshakes batched, its CPU
// and RSS) is measured by bench/agent-fanin.mjs, whose simulated agents use this
// same class.

/** A stream that lived this long counts as a gateway that "was just there". */
export const STABLE_STREAM_MS = 10_000;
/** How long after losing such a stream the short delays apply. */
export const YOUNG_OUTAGE_MS = 30_000;
/** The longest delay while the outage is young (bounded by the configured max). */
export const YOUNG_CAP_MS = 2_000;

export class Backoff {
  #attempt = 0;
  /** When the last Welcome came, while that stream may still be up. */
  #connectedAt: number | undefined;
  /** When the young outage began, if the current outage is one. */
  #youngSince: number | undefined;
  #previous = 0;

  constructor(
    readonly minMs: number,
    readonly maxMs: number,
    readonly random: () => number = Math.random,
    /** The clock (a test's own). */
    readonly now: () => number = Date.now,
  ) {}

  /** The delay before the next attempt. */
  next(): number {
    const now = this.now();
    if (this.#connectedAt !== undefined) {
      // The first delay after a stream ended: was it a gateway that was just there?
      if (now - this.#connectedAt >= STABLE_STREAM_MS) this.#youngSince = now;
      this.#connectedAt = undefined;
      this.#previous = this.minMs;
    }
    if (this.#youngSince !== undefined && now - this.#youngSince < YOUNG_OUTAGE_MS) {
      const cap = Math.min(this.maxMs, Math.max(this.minMs, YOUNG_CAP_MS));
      const upper = Math.min(cap, this.#previous * 3);
      this.#previous = Math.min(cap, this.minMs + this.random() * Math.max(0, upper - this.minMs));
      this.#attempt = Math.min(this.#attempt + 1, 30);
      return Math.floor(this.#previous);
    }
    this.#youngSince = undefined;
    const ceiling = Math.min(this.maxMs, this.minMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30); // 2^30·min is past any sane max; avoids Infinity
    return Math.floor(this.random() * ceiling);
  }

  /** A stream was established (Welcome): start again from the smallest delays. */
  reset(): void {
    this.#attempt = 0;
    this.#youngSince = undefined;
    this.#connectedAt = this.now();
  }
}

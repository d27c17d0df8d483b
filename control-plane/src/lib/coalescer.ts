// Coalesces many callers' small database reads and writes into batches: while
// one batch is in flight, new items queue, and the next batch takes them all
// (up to `max`). For the gateway's connection storms — every agent reconnecting
// after a restart — where one lookup or write per agent would queue thousands of
// requests on the connection pool (and time out there) instead of ~one per
// batch. Each caller gets its own item's answer; a batch that fails fails only
// its own callers.

interface Waiting<I, R> {
  item: I;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

export class Coalescer<I, R> {
  #queue: Waiting<I, R>[] = [];
  #running = 0;

  /** `run` answers a batch: one result per item, in the items' order. */
  constructor(
    private readonly run: (items: I[]) => Promise<R[]>,
    private readonly max = 500,
    /**
     * Batches in flight at once, each on its own pooled connection: with one, a storm's items
     * wait for every batch before theirs to commit (agent-fanin saw 10,000 Hellos go 200 at a
     * time, one commit after another, on a loaded database).
     */
    private readonly concurrency = 1,
    /**
     * A batch beyond the first starts only when this many items wait; fewer wait for the batch in
     * flight and go with the next one. Without it, callers that come one at a time (a fleet whose
     * connects are spread over a second, not bunched per read) each start a batch of one while a
     * slot is free: agent-fanin saw 5.3 statements per agent's connect instead of 1.8, and twice
     * the gateway's CPU. 1: every free slot takes whatever waits.
     */
    private readonly spareAt = 1,
    /**
     * How long a batch that starts with nothing in flight waits for more items first. 0 (the
     * default) for reads a request waits on; a few ms where nobody waits on one item's latency
     * (an agent's connect) and callers come one at a time: they then go in one batch, not one each.
     */
    private readonly lingerMs = 0,
  ) {}

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      const free =
        this.#running === 0 || (this.#running < this.concurrency && this.#queue.length >= this.spareAt);
      if (free) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#running++;
    try {
      if (this.lingerMs > 0 && this.#running === 1) await new Promise((r) => setTimeout(r, this.lingerMs));
      while (this.#queue.length > 0) {
        const batch = this.#queue.splice(0, this.max);
        try {
          const results = await this.run(batch.map((w) => w.item));
          batch.forEach((w, i) => w.resolve(results[i] as R));
        } catch (err) {
          for (const w of batch) w.reject(err);
        }
      }
    } finally {
      this.#running--;
    }
  }
}

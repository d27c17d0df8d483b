// Records agents' JobAcks (delivery `acked`) in batches. An ack is bookkeeping,
// not a result: writing each one at once would put a second write of the same
// row on the hot path of every short command, racing its result for the row lock.
import type { Knex } from "knex";
import type { Logger } from "pino";
import { markDelivery } from "../operations/store.js";

const FLUSH_MS = 200;
const MAX_BATCH = 500;

export class AckWriter {
  private pending = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
  ) {}

  add(operationId: string): void {
    this.pending.add(operationId);
    if (this.pending.size >= MAX_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const ids = [...this.pending];
    this.pending = new Set();
    // Rows already finished are left alone by markDelivery's state guard.
    await markDelivery(this.db, ids, "acked").catch((err) => this.log.warn({ err }, "recording acks failed"));
  }
}

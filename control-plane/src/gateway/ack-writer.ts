// Records agents' JobAcks (delivery `acked`) in batches. An ack is bookkeeping,
// not a result: writing each one at once would put a second write of the same
// row on the hot path of every short command, racing its result for the row lock.
// An ack whose result was stored before the flush is dropped (the result moved
// the row to `finished`, which an ack never overwrites): a short command costs
// no ack write at all.
import type { Knex } from "knex";
import type { Logger } from "pino";
import { markAcked } from "../operations/store.js";

const FLUSH_MS = 200;
const MAX_BATCH = 500;

export class AckWriter {
  /** Operation ids by the server whose agent acked them. */
  private pending = new Map<string, Set<string>>();
  private size = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly log: Logger,
  ) {}

  add(serverId: string, operationId: string): void {
    const ids = this.pending.get(serverId) ?? new Set<string>();
    this.pending.set(serverId, ids);
    if (!ids.has(operationId)) this.size++;
    ids.add(operationId);
    if (this.size >= MAX_BATCH) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** The operation's result is stored: its pending ack, if any, has nothing left to record. */
  settled(serverId: string, operationId: string): void {
    if (this.pending.get(serverId)?.delete(operationId)) this.size--;
  }

  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.size === 0) return;
    const batches = [...this.pending];
    this.pending = new Map();
    this.size = 0;
    // Rows already finished are left alone by markAcked's state guard, and an
    // agent's ack moves only operations of its own server.
    for (const [serverId, ids] of batches) {
      if (ids.size === 0) continue;
      await markAcked(this.db, serverId, [...ids]).catch((err) =>
        this.log.warn({ err }, "recording acks failed"),
      );
    }
  }
}

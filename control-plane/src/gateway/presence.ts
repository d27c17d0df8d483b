// When each agent was last heard from, stored so that every api instance shows
// the same "last seen" (issue 31, defect 7): the gateway holding the stream
// writes servers.last_seen_at on a heartbeat at most once per PRESENCE_EVERY
// heartbeat intervals per stream (a write per heartbeat would be a row update
// every 5 s per server), batched across agents like the Hello writes.
import type { Knex } from "knex";
import { Coalescer } from "../lib/coalescer.js";

/** Heartbeat intervals between two stored ones: 30 s with the default 5 s interval. */
export const PRESENCE_EVERY = 6;

const writers = new WeakMap<Knex, Coalescer<string, undefined>>();

function writerOf(db: Knex): Coalescer<string, undefined> {
  let w = writers.get(db);
  if (!w) {
    w = new Coalescer(async (serverIds) => {
      // One statement for the batch: the time it is written is the time they were seen.
      await db("servers")
        .whereIn("id", [...new Set(serverIds)])
        .update({ last_seen_at: Date.now() });
      return serverIds.map(() => undefined);
    });
    writers.set(db, w);
  }
  return w;
}

/** One stream's throttle: store() writes when the last stored time is old enough. */
export class Presence {
  private storedAt: number;

  constructor(
    private readonly db: Knex,
    private readonly serverId: string,
    private readonly heartbeatIntervalMs: number,
    /** The clock (a test's own). */
    private readonly now: () => number = Date.now,
  ) {
    // The Hello stored last_seen_at at the connect.
    this.storedAt = now();
  }

  /** A heartbeat arrived: stored when PRESENCE_EVERY intervals have passed since the last store. */
  async heartbeat(): Promise<void> {
    const now = this.now();
    // Half an interval of slack: heartbeats arrive a little early or late.
    if (now - this.storedAt < (PRESENCE_EVERY - 0.5) * this.heartbeatIntervalMs) return;
    this.storedAt = now;
    await writerOf(this.db).submit(this.serverId);
  }
}

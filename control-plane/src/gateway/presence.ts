// When each agent was last heard from, stored so that every api instance shows
// the same "last seen" (issue 31, defect 7): the gateway holding the stream
// writes servers.last_seen_at on a heartbeat at most once per PRESENCE_EVERY
// heartbeat intervals per stream (a write per heartbeat would be a row update
// every 5 s per server), the servers due within PRESENCE_FLUSH_MS in one statement.
import type { Knex } from "knex";

/** Heartbeat intervals between two stored ones: 30 s with the default 5 s interval. */
export const PRESENCE_EVERY = 6;

/**
 * How long a due server waits for others to be written with it. Agents heartbeat evenly spread,
 * so a write as soon as one was due (batching only what queued behind the statement in flight)
 * made a statement for one or two servers at a time: ~145 a second at 4,000 agents, a sixth of
 * the gateway's heartbeat CPU in a profile (mysql2's socket writes and knex's SQL building).
 */
export const PRESENCE_FLUSH_MS = 1000;

/** Ids a statement names at most. */
const MAX_IDS = 1000;

/** The servers due, written together once PRESENCE_FLUSH_MS has passed since the first of them. */
class PresenceWriter {
  #due = new Set<string>();
  #written: Promise<void> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly flushMs: number,
  ) {}

  /** Resolves once the batch with `serverId` is committed. */
  store(serverId: string): Promise<void> {
    this.#due.add(serverId);
    this.#written ??= new Promise<void>((resolve) => setTimeout(resolve, this.flushMs).unref()).then(() =>
      this.#write(),
    );
    return this.#written;
  }

  async #write(): Promise<void> {
    const ids = [...this.#due];
    this.#due = new Set();
    this.#written = undefined;
    // The time it is written is the time they were seen (within the flush and the throttle).
    const now = Date.now();
    for (let i = 0; i < ids.length; i += MAX_IDS) {
      await this.db("servers")
        .whereIn("id", ids.slice(i, i + MAX_IDS))
        .update({ last_seen_at: now });
    }
  }
}

const writers = new WeakMap<Knex, PresenceWriter>();

function writerOf(db: Knex, flushMs: number): PresenceWriter {
  let w = writers.get(db);
  if (!w) {
    w = new PresenceWriter(db, flushMs);
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
    /** A test's own flush delay (taken by the first Presence of a database). */
    private readonly flushMs = PRESENCE_FLUSH_MS,
  ) {
    // The Hello stored last_seen_at at the connect.
    this.storedAt = now();
  }

  /**
   * A heartbeat arrived: stored when PRESENCE_EVERY intervals have passed since the last store
   * (the promise: until it is committed). Not due, nothing: no promise for the five heartbeats of
   * six that store nothing.
   */
  heartbeat(): Promise<void> | undefined {
    const now = this.now();
    // Half an interval of slack: heartbeats arrive a little early or late.
    if (now - this.storedAt < (PRESENCE_EVERY - 0.5) * this.heartbeatIntervalMs) return undefined;
    this.storedAt = now;
    return writerOf(this.db, this.flushMs).store(this.serverId);
  }
}

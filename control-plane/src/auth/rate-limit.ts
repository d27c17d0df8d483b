// Fixed-window request counters kept in the database, so a key's limit is exact
// across every api instance sharing it. The increment and the read of the new
// value are one atomic step: MySQL's LAST_INSERT_ID(expr) hands back the value
// this statement wrote (a separate SELECT could see a later request's increment),
// SQLite returns it with RETURNING.
import type { Knex } from "knex";
import { isSqlite } from "../db/knex.js";

export interface WindowCount {
  allowed: boolean;
  /** Requests counted in this window, this one included (rejected ones too). */
  count: number;
  limit: number;
  windowSeconds: number;
  windowStart: number;
  /** Seconds until the next window opens (at least 1). */
  retryAfterSeconds: number;
}

async function increment(db: Knex, keyId: string, windowSeconds: number, windowStart: number) {
  const args = [keyId, windowSeconds, windowStart];
  if (isSqlite(db)) {
    const rows = await db.raw(
      `INSERT INTO rate_limit_counters (key_id, window_seconds, window_start, count) VALUES (?, ?, ?, 1)
       ON CONFLICT (key_id, window_seconds, window_start) DO UPDATE SET count = count + 1 RETURNING count`,
      args,
    );
    return Number(rows[0].count);
  }
  const [results] = await db.raw(
    `INSERT INTO rate_limit_counters (key_id, window_seconds, window_start, count) VALUES (?, ?, ?, LAST_INSERT_ID(1))
     ON DUPLICATE KEY UPDATE count = LAST_INSERT_ID(count + 1); SELECT LAST_INSERT_ID() AS n`,
    args,
  );
  return Number(results[1][0].n);
}

/** Counts one request of `keyId` in the current window of `windowSeconds`. */
export async function countRequest(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  limit: number,
  now = Date.now(),
): Promise<WindowCount> {
  const windowMs = windowSeconds * 1000;
  const windowStart = Math.floor(now / windowMs) * windowMs;
  const count = await increment(db, keyId, windowSeconds, windowStart);
  if (count === 1) {
    // First request of a window: drop this key's finished windows of this length.
    await db("rate_limit_counters")
      .where({ key_id: keyId, window_seconds: windowSeconds })
      .where("window_start", "<", windowStart)
      .delete();
  }
  const retryAfterSeconds = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
  return { allowed: count <= limit, count, limit, windowSeconds, windowStart, retryAfterSeconds };
}

/** True for exactly one caller per key and window: the one that should audit the hit. */
export async function claimFirstRejection(db: Knex, keyId: string, w: WindowCount): Promise<boolean> {
  const n = await db("rate_limit_counters")
    .where({
      key_id: keyId,
      window_seconds: w.windowSeconds,
      window_start: w.windowStart,
      hit_recorded: false,
    })
    .update({ hit_recorded: true });
  return Number(n) === 1;
}

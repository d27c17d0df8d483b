// Fixed-window request counters kept in the database, so a key's limit is exact
// across every api instance sharing it. The increment and the read of the new
// value are one atomic statement and one round trip: on MySQL/MariaDB,
// LAST_INSERT_ID(expr) makes the value this statement wrote the insert id of its
// OK packet (a separate SELECT could see a later request's increment, and sending
// both at once would need multipleStatements); SQLite returns it with RETURNING.
import type { Knex } from "knex";
import { isSqlite } from "../db/knex.js";
import { type Statement, compiled, isStatement, queryPooled, runStatement } from "../db/statement.js";

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

/**
 * A read sent with a batch's increment: the query's rows come back from the same
 * round trip (MySQL/MariaDB: one multi-statement query, the SELECT running after
 * the increment; SQLite: right after it on the one connection).
 */
export type BatchRead = Knex.QueryBuilder | Statement;

/** Adds `n` to the window's counter in one atomic statement; returns the new total (and `read`'s rows). */
async function increment(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  windowStart: number,
  n: number,
  read?: BatchRead,
): Promise<{ total: number; rows: unknown[] }> {
  const args = [keyId, windowSeconds, windowStart, n, n];
  if (isSqlite(db)) {
    const rows = await db.raw(
      `INSERT INTO rate_limit_counters (key_id, window_seconds, window_start, count) VALUES (?, ?, ?, ?)
       ON CONFLICT (key_id, window_seconds, window_start) DO UPDATE SET count = count + ? RETURNING count`,
      args,
    );
    const readRows = read ? await (isStatement(read) ? runStatement(db, read) : read) : [];
    return { total: Number(rows[0].count), rows: readRows };
  }
  const sql = `INSERT INTO rate_limit_counters (key_id, window_seconds, window_start, count) VALUES (?, ?, ?, LAST_INSERT_ID(?))
     ON DUPLICATE KEY UPDATE count = LAST_INSERT_ID(count + ?)`;
  if (!read) {
    const [header] = await queryPooled(db, sql, args);
    return { total: Number((header as { insertId: number }).insertId), rows: [] };
  }
  // The connection is opened with multipleStatements (db/knex.ts); every value is bound.
  const q = compiled(read);
  const [results] = await queryPooled(db, `${sql};\n${q.sql}`, [...args, ...q.bindings]);
  const [header, rows] = results as [{ insertId: number }, unknown[]];
  return { total: Number(header.insertId), rows };
}

interface Counted {
  ordinal: number;
  /** The rows of the batch's read, read after this request arrived. */
  rows: unknown[];
}

interface CountBatch {
  waiting: { resolve: (c: Counted) => void; reject: (err: unknown) => void }[];
}

/**
 * Requests of one key and window counted in one process are coalesced: while
 * one increment is in flight the next ones queue, then go as ONE `count + k`
 * increment, and each request takes its own ordinal (total − k + 1 … total) in
 * arrival order. The counter is still the database's, incremented atomically,
 * so the ordinals handed out across every instance are exactly 1…total and the
 * limit stays exact; a hot key just costs one write per batch, not per request.
 */
const inFlight = new WeakMap<Knex, Map<string, CountBatch | null>>();

function nextOrdinal(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  windowStart: number,
  read?: () => BatchRead,
): Promise<Counted> {
  let queues = inFlight.get(db);
  if (!queues) {
    queues = new Map();
    inFlight.set(db, queues);
  }
  const slot = `${keyId}\n${windowSeconds}\n${windowStart}${read ? "\nread" : ""}`;
  return new Promise<Counted>((resolve, reject) => {
    const queued = queues.get(slot);
    if (queued !== undefined) {
      // An increment is in flight: join (or open) the batch that goes next.
      const next = queued ?? { waiting: [] };
      next.waiting.push({ resolve, reject });
      queues.set(slot, next);
      return;
    }
    queues.set(slot, null);
    const run = async (batch: CountBatch["waiting"]) => {
      try {
        const { total, rows } = await increment(
          db,
          keyId,
          windowSeconds,
          windowStart,
          batch.length,
          read?.(),
        );
        batch.forEach((w, i) => w.resolve({ ordinal: total - batch.length + 1 + i, rows }));
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
      const next = queues.get(slot);
      if (next) {
        queues.set(slot, null);
        void run(next.waiting);
      } else queues.delete(slot);
    };
    void run([{ resolve, reject }]);
  });
}

/** One request counted in its window, before it is judged against a limit. */
export interface Count {
  /** Requests counted in this window, this one included (rejected ones too). */
  count: number;
  windowSeconds: number;
  windowStart: number;
  retryAfterSeconds: number;
}

async function countIn<R>(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  now: number,
  read?: () => BatchRead,
): Promise<Count & { rows: R[] }> {
  const windowMs = windowSeconds * 1000;
  const windowStart = Math.floor(now / windowMs) * windowMs;
  const { ordinal: count, rows } = await nextOrdinal(db, keyId, windowSeconds, windowStart, read);
  if (count === 1) {
    // First request of a window: drop this key's finished windows of this length.
    await db("rate_limit_counters")
      .where({ key_id: keyId, window_seconds: windowSeconds })
      .where("window_start", "<", windowStart)
      .delete();
  }
  const retryAfterSeconds = Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
  return { count, windowSeconds, windowStart, retryAfterSeconds, rows: rows as R[] };
}

/** A counted request judged against `limit`. */
export function judge(c: Count, limit: number): WindowCount {
  const { count, windowSeconds, windowStart, retryAfterSeconds } = c;
  return { allowed: count <= limit, count, limit, windowSeconds, windowStart, retryAfterSeconds };
}

/** Counts one request of `keyId` in the current window of `windowSeconds`. */
export async function countRequest(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  limit: number,
  now = Date.now(),
): Promise<WindowCount> {
  return judge(await countIn(db, keyId, windowSeconds, now), limit);
}

/**
 * Counts one request like countRequest and returns the rows of `read`, sent in
 * the same round trip as the increment and run after it, so after this request
 * arrived (concurrent requests of the key in one batch share one read). The
 * caller judges the count with a limit it may take from those rows.
 */
export function countRequestReading<R>(
  db: Knex,
  keyId: string,
  windowSeconds: number,
  read: () => BatchRead,
  now = Date.now(),
): Promise<Count & { rows: R[] }> {
  return countIn<R>(db, keyId, windowSeconds, now, read);
}

const windowOf = (keyId: string, w: Pick<WindowCount, "windowSeconds" | "windowStart">) => ({
  key_id: keyId,
  window_seconds: w.windowSeconds,
  window_start: w.windowStart,
});

/** Refusals (401/403 of a known key) counted in the window so far. */
export async function refusedInWindow(db: Knex, keyId: string, w: WindowCount): Promise<number> {
  const row = await db("rate_limit_counters").where(windowOf(keyId, w)).first<{ refused: number }>("refused");
  return Number(row?.refused ?? 0);
}

/**
 * Counts one refusal of `keyId` in its current window of `windowSeconds` (the
 * request itself was counted on admission). True for exactly one refusal per
 * key and window: the one that should be audited.
 */
export async function countRefusal(db: Knex, keyId: string, windowSeconds: number, now = Date.now()) {
  const windowMs = windowSeconds * 1000;
  const where = windowOf(keyId, { windowSeconds, windowStart: Math.floor(now / windowMs) * windowMs });
  // An upsert: at a window's edge the refusal may fall in a window the request was not counted in.
  await db("rate_limit_counters")
    .insert({ ...where, count: 0, refused: 1 })
    .onConflict(["key_id", "window_seconds", "window_start"])
    .merge({ refused: db.raw("?? + 1", ["rate_limit_counters.refused"]) });
  const claimed = await db("rate_limit_counters")
    .where({ ...where, refusal_recorded: false })
    .update({ refusal_recorded: true });
  return { first: Number(claimed) === 1, windowStart: where.window_start };
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

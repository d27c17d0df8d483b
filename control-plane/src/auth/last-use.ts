// "Last used" of a credential (API keys, automation keys, web sessions) for the
// people pages (issue 31). Written at most once a minute per credential and
// process: a key calling 100 times a minute costs one UPDATE, not 100, and
// the admission's one round trip (admit-automation-key.ts) stays one. The
// write is not awaited: a request never waits for, or fails because of, its
// bookkeeping; a lost write only makes "last used" up to a minute older.
import type { Knex } from "knex";
import type { FastifyBaseLogger } from "fastify";

/** How stale a shown "last used" may be. */
export const LAST_USE_RESOLUTION_MS = 60_000;

type Table = "api_keys" | "automation_keys" | "web_sessions";

/** Table → id → when this process last wrote it; per database (tests run several in one process). */
const written = new WeakMap<Knex, Map<string, number>>();
const MAX_TRACKED = 10_000;

export function noteUse(db: Knex, log: FastifyBaseLogger, table: Table, id: string, now = Date.now()): void {
  let seen = written.get(db);
  if (!seen) {
    seen = new Map();
    written.set(db, seen);
  }
  const key = `${table}\n${id}`;
  const last = seen.get(key);
  if (last !== undefined && now - last < LAST_USE_RESOLUTION_MS) return;
  if (seen.size >= MAX_TRACKED) seen.clear();
  seen.set(key, now);
  db(table)
    .where({ id })
    .update({ last_used_at: now })
    .catch((err: unknown) => {
      // Let the next request try again rather than wait out the minute.
      seen.delete(key);
      log.debug({ err, table }, "last use not recorded");
    });
}

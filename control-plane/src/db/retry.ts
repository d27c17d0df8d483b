// A transaction InnoDB chose as a deadlock's victim (or that waited out its lock
// wait timeout) was rolled back whole: nothing of it stayed, so running it again
// is safe and is what MySQL's manual asks of applications. Small transactions of
// people's requests (sign-ins, token rotations, revocations) meet this when many
// run at once against the same tables and the tenant's audit chain head; without
// a retry the person got a 500 for a race they could not see.
import type { Knex } from "knex";

const RETRYABLE = new Set(["ER_LOCK_DEADLOCK", "ER_LOCK_WAIT_TIMEOUT"]);
const ATTEMPTS = 4;

export function isRetryableLockError(err: unknown): boolean {
  for (let e = err as { code?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e.code && RETRYABLE.has(e.code)) return true;
    if (e === e.cause) break;
  }
  return false;
}

/** db.transaction(fn), run again (up to 4 times in all) when it lost a deadlock. */
export async function transactionRetrying<T>(
  db: Knex,
  fn: (trx: Knex.Transaction) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction(fn);
    } catch (err) {
      if (attempt >= ATTEMPTS || !isRetryableLockError(err)) throw err;
      // A short random pause so the two sides of the deadlock do not meet again at once.
      await new Promise((r) => setTimeout(r, Math.random() * 10 * attempt));
    }
  }
}

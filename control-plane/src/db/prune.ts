import type { Knex } from "knex";

/**
 * Deletes rows that are past keeping, as housekeeping beside a request's own
 * work: in a statement of its own, never inside the request's transaction, and
 * never failing the request. A range delete on a column without an index locks
 * the gaps it scans, and inside a transaction that also inserts into the same
 * table it deadlocks with a concurrent request doing the same (MariaDB chose
 * such a request as the victim and the caller got a 500). A prune that loses a
 * race, or meets a busy database, leaves its rows for the next one.
 */
export async function pruneRows(query: Knex.QueryBuilder): Promise<void> {
  try {
    await query.delete();
  } catch {
    // a deadlock victim or a busy database: the rows stay until the next prune
  }
}

// What the group commit (group-commit.ts) is given: an audited write, which runs
// its own statements, or an item of a bulk kind, written with the others of its
// kind; and what each answers.
import type { Knex } from "knex";
import type { Statement } from "../db/statement.js";
import type { AuditEventInput, Write } from "./audit-log.js";

/** One audited write: its rows, then the event that records it (null: nothing to audit, e.g. a lost race). */
export type AuditedWrite<T> = (trx: Knex.Transaction) => Promise<{ event: AuditEventInput | null; value: T }>;

/** What a bulk write gives back per item: as an AuditedWrite's answer. */
export interface WriteOutcome<T> {
  event: AuditEventInput | null;
  /** Events of the same write after `event`, chained right behind it (a completion's settlement). */
  more?: AuditEventInput[];
  value: T;
}

/** The events of `done`, in order. */
export const eventsOf = (done: WriteOutcome<unknown>[]): AuditEventInput[] =>
  done.flatMap((d) => (d.event ? [d.event, ...(d.more ?? [])] : (d.more ?? [])));

/**
 * Writes of one kind that are made many at once (one multi-row insert, one
 * read of all the rows...). One stable object per kind: consecutive items of
 * the same kind in a batch are handled together.
 */
export interface BulkKind<I, T> {
  /**
   * An optional locking read of what the items need (SELECT ... FOR UPDATE): on
   * MySQL it goes in the same round trip as the chain head's lock.
   */
  read?(db: Knex, items: I[]): Knex.QueryBuilder | Statement;
  /**
   * Given the rows read (locked until the commit), what each item answers and
   * the statements to run (no answers needed from them: they are sent with the
   * events, and the commit on MySQL).
   */
  plan(db: Knex, items: I[], rows: unknown[]): { outcomes: WriteOutcome<T>[]; writes: Write[] };
  /**
   * Optional, for a kind with a read: the plan when the items carry what the
   * read would return (the completion of a job whose facts its gateway was
   * told). Used only on a guessed head, in one round trip: each write must
   * change exactly `rows` rows, or the statement stops before the events and
   * COMMIT and the batch goes the locking way (read, then plan); a write
   * without `rows` is not checked.
   */
  planKnown?(
    db: Knex,
    items: I[],
  ): { outcomes: WriteOutcome<T>[]; writes: { write: Write; rows?: number }[] };
}

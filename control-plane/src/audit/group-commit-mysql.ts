// The group commit's MySQL ways of a batch of bulk writes (group-commit.ts picks
// the way): two round trips under the chain head's lock, or one on a guessed head;
// and the heads this process guesses.
//
// The keyed chain needs the head in Node (the HMAC key never goes to the
// database), which costs a round trip to lock and read it before the writes.
// When this process has a recent guess of the head (noteChainHead: the
// automation key's admission reads it in its own round trip, and every commit
// here leaves its new head), a batch of bulk writes without reads goes in ONE
// round trip instead: the head's UPDATE comes first and moves it only from the
// guessed seq, so it takes the head's lock in the order every append does; when
// it moved nothing (ROW_COUNT() = 0: the guess was stale) the next statement
// inserts the tenant's head row again, which its primary key refuses, and the
// refused statement stops the multi-statement before any event and before
// COMMIT. A stale guess is rolled back whole and the batch goes the locking
// way; the guesses of that tenant then rest a second, so a busy chain written
// by several processes pays for at most one miss a second. A kind whose items
// carry what its locking read would return (planKnown: a completion whose
// gateway was told its operation's row) goes that way too: its update must move
// exactly the rows it names, or the same refused insert stops it before any event.
import { isCountRefused } from "../auth/deferred-count.js";
import { isStoreUnavailable } from "../db/unavailable.js";
import { auditCommits } from "../observability/metrics.js";
import type { Knex } from "knex";
import { type Statement, compiled, queryOn } from "../db/statement.js";
import { type Write, chainRows, chainWrites, sendInOrder } from "./audit-log.js";
import { type BulkKind, type WriteOutcome, eventsOf } from "./audited-write.js";

/** How long a tenant's guessed head is not used after one turned out stale. */
const GUESS_REST_MS = 1000;

/** Tenants whose guessed heads one process keeps at most. */
const MAX_GUESSES = 10_000;

/** A tenant's chain head as this process last read or wrote it. */
export interface ChainHead {
  head: string | null;
  seq: number;
}

/** Each tenant's guessed chain head in one process (kept on MySQL only). */
export class HeadGuesses {
  readonly #mysql: boolean;
  /** Tenant → the newest head seen (read by admission or left by a commit here). */
  readonly #guesses = new Map<string, ChainHead>();
  /** Tenant → until when its guesses rest after a stale one. */
  readonly #resting = new Map<string, number>();
  /** Batches committed in one round trip on a guessed head, and guesses found stale (tests read them). */
  readonly stats = { guessed: 0, stale: 0 };

  constructor(mysql: boolean) {
    this.#mysql = mysql;
  }

  /** Keeps `head` as the tenant's guess when it is newer than the one kept. */
  note(tenantId: string, head: ChainHead): void {
    if (!this.#mysql) return;
    const kept = this.#guesses.get(tenantId);
    if (kept && kept.seq > head.seq) return;
    if (!kept && this.#guesses.size >= MAX_GUESSES) this.#guesses.clear();
    this.#guesses.set(tenantId, head);
  }

  /** The newest head kept for the tenant, resting or not. */
  guessOf(tenantId: string): ChainHead | undefined {
    return this.#guesses.get(tenantId);
  }

  /** The tenant's guess, unless none is kept or they rest after a stale one. */
  guess(tenantId: string): ChainHead | undefined {
    const until = this.#resting.get(tenantId);
    if (until !== undefined) {
      if (Date.now() < until) return undefined;
      this.#resting.delete(tenantId);
    }
    return this.#guesses.get(tenantId);
  }

  /** The tenant's guess turned out stale: it is dropped, and the tenant's guesses rest. */
  rest(tenantId: string): void {
    this.#guesses.delete(tenantId);
    this.#resting.set(tenantId, Date.now() + GUESS_REST_MS);
  }
}

/**
 * A batch of bulk writes on MySQL in two round trips: (1) start the
 * transaction, lock the chain head and take the kinds' locking reads; (2) every
 * write, the chained events, the head's move and COMMIT, as one multi-statement.
 * The server runs a multi-statement in order and stops at the first error, so
 * either COMMIT ran after everything or nothing after the failure did (and the
 * transaction is rolled back here). Against the knex transaction this saves
 * BEGIN, COMMIT and a round trip per kind.
 */
export async function twoRoundTrips(
  db: Knex,
  heads: HeadGuesses,
  tenantId: string,
  runs: { kind: BulkKind<unknown, unknown>; items: unknown[] }[],
  known: boolean,
): Promise<unknown[] | undefined> {
  const reads = runs.map((r) => (known ? undefined : r.kind.read?.(db, r.items)));
  const conn = await db.client.acquireConnection();
  let open = false;
  try {
    const first = [lockHead(tenantId), ...reads.flatMap((r) => (r ? [compiled(r)] : []))];
    open = true;
    const [results] = (await queryOn(
      db,
      conn,
      ["START TRANSACTION", ...first.map((c) => c.sql)].join(";\n"),
      first.flatMap((c) => c.bindings),
    )) as [unknown[], unknown];
    const headRows = results[1] as { head: string | null; seq: number }[];
    const chainRow = headRows[0];
    if (!chainRow) throw new Error(`audit: tenant ${tenantId} has no audit chain`);
    let nextRead = 2;
    let guarded = false;
    const done: WriteOutcome<unknown>[] = [];
    const writes: Write[] = [];
    runs.forEach((r, i) => {
      const planKnown = known ? r.kind.planKnown?.(db, r.items) : undefined;
      const rows = reads[i] ? (results[nextRead++] as unknown[]) : [];
      const out = planKnown ?? r.kind.plan(db, r.items, rows);
      if (out.outcomes.length !== r.items.length)
        throw new Error("audit: a bulk write answered the wrong count");
      done.push(...out.outcomes);
      if (!planKnown) writes.push(...(out.writes as Write[]));
      // Each known write must move exactly its rows, or the refused insert stops it here.
      for (const w of planKnown?.writes ?? []) {
        writes.push(w.write);
        if (w.rows === undefined) continue;
        writes.push(rowsOrStop(tenantId, w.rows));
        guarded = true;
      }
    });
    const events = eventsOf(done);
    if (events.some((e) => e.tenantId !== tenantId))
      throw new Error("audit: the event belongs to another tenant's chain");
    const chained = chainRows({ head: chainRow.head, seq: Number(chainRow.seq) }, events);
    writes.push(...chainWrites(tenantId, chained));
    try {
      await sendInOrder(db, writes, conn, "COMMIT");
    } catch (err) {
      // A known write that missed its rows (the refused insert of the head's row): rolled back
      // below; the caller reads the rows. Anything else is the caller's, as on the locking read.
      if (guarded && isDuplicateKey(err)) return undefined;
      throw err;
    }
    open = false;
    heads.note(tenantId, { head: chained.head, seq: chained.seq });
    return done.map((d) => d.value);
  } finally {
    try {
      if (open) await queryOn(db, conn, "ROLLBACK");
    } catch {
      // A broken connection: the server rolls back when it goes.
    }
    await db.client.releaseConnection(conn);
  }
}

/**
 * A batch of bulk writes without reads on MySQL in ONE round trip, chained
 * after `guess`: START TRANSACTION, the head moved only from the guessed seq,
 * the events, the writes, COMMIT. Undefined when the guess was stale (or the
 * attempt failed otherwise): nothing of it was committed, and the caller
 * takes the locking way, whose own errors are the caller's to handle.
 */
export async function oneRoundTrip(
  db: Knex,
  heads: HeadGuesses,
  tenantId: string,
  runs: { kind: BulkKind<unknown, unknown>; items: unknown[] }[],
  guess: ChainHead,
): Promise<unknown[] | undefined> {
  const done: WriteOutcome<unknown>[] = [];
  const writes: Statement[] = [];
  for (const r of runs) {
    const known = r.kind.planKnown?.(db, r.items);
    const plain = known ? undefined : r.kind.plan(db, r.items, []);
    const outcomes = known?.outcomes ?? plain!.outcomes;
    if (outcomes.length !== r.items.length) throw new Error("audit: a bulk write answered the wrong count");
    done.push(...outcomes);
    for (const w of plain?.writes ?? []) writes.push(compiled(w));
    for (const w of known?.writes ?? [])
      writes.push(compiled(w.write), ...(w.rows === undefined ? [] : [rowsOrStop(tenantId, w.rows)]));
  }
  const events = eventsOf(done);
  if (events.length === 0) return undefined;
  if (events.some((e) => e.tenantId !== tenantId))
    throw new Error("audit: the event belongs to another tenant's chain");
  const chained = chainRows(guess, events);
  const [insertEvents] = chainWrites(tenantId, chained);
  const moveHead: Statement = {
    sql: "UPDATE `audit_chain_heads` SET `head` = ?, `seq` = ? WHERE `tenant_id` = ? AND `seq` = ?",
    bindings: [chained.head, chained.seq, tenantId, guess.seq],
  };
  // The head did not move (it is past the guess): a duplicate of its row, refused, ends it here.
  const staleStops: Statement = {
    sql: "INSERT INTO `audit_chain_heads` (`tenant_id`, `seq`) SELECT ?, 0 FROM DUAL WHERE ROW_COUNT() = 0",
    bindings: [tenantId],
  };
  // The writes before the events: a known plan's write that missed its rows stops before any event.
  const statements = [moveHead, staleStops, ...writes, insertEvents!];
  const conn = await db.client.acquireConnection();
  let open = false;
  try {
    open = true;
    await queryOn(
      db,
      conn,
      ["START TRANSACTION", ...statements.map((c) => c.sql), "COMMIT"].join(";\n"),
      statements.flatMap((c) => c.bindings),
    );
    open = false;
    heads.stats.guessed++;
    auditCommits.inc({ way: "guessed" });
    heads.note(tenantId, { head: chained.head, seq: chained.seq });
    return done.map((d) => d.value);
  } catch (err) {
    if (!open) throw err;
    // Stale (the next seq is taken), or any other refusal: rolled back below, then the locking way.
    // A start's count refused by its guard (auth/deferred-count.ts) is the batch's, not the guess's.
    if (isStoreUnavailable(err) || isCountRefused(err)) throw err;
    heads.stats.stale++;
    auditCommits.inc({ way: "stale" });
    heads.rest(tenantId);
    return undefined;
  } finally {
    try {
      if (open) await queryOn(db, conn, "ROLLBACK");
    } catch {
      // A broken connection: the server rolls back when it goes.
    }
    await db.client.releaseConnection(conn);
  }
}

/** MySQL's duplicate-key refusal (ER_DUP_ENTRY): how the guard statements stop a multi-statement. */
const isDuplicateKey = (err: unknown): boolean => (err as { errno?: number } | null)?.errno === 1062;

/** The chain head's lock (MySQL), as lockChainHead takes it. */
const lockHead = (tenantId: string): Statement => ({
  sql: "SELECT `head`, `seq` FROM `audit_chain_heads` WHERE `tenant_id` = ? FOR UPDATE",
  bindings: [tenantId],
});

/**
 * Stops a multi-statement unless the write before it changed exactly `rows`
 * rows: the tenant's head row inserted again, which its primary key refuses.
 */
const rowsOrStop = (tenantId: string, rows: number): Statement => ({
  sql: "INSERT INTO `audit_chain_heads` (`tenant_id`, `seq`) SELECT ?, 0 FROM DUAL WHERE ROW_COUNT() <> ?",
  bindings: [tenantId, rows],
});

// Group commit of audited writes. Every audited write locks its tenant's chain
// head until it commits (audit-log.ts), so one tenant's audited writes run one
// at a time: measured with 64 clients, ~160 operations per second whatever the
// CPU, each lock held for several round trips and a durable commit. Here the
// audited writes of one process are queued per tenant; while one transaction is
// in flight the next ones wait, and then all that waited go in ONE transaction:
// one lock of the chain head, each write, their events chained in order in one
// multi-row insert, one head update, one commit (one fsync).
//
// Guarantees kept: a caller is answered only after its transaction committed
// (nothing runs unaudited, nothing is announced before it is durable); the
// chain stays linear across instances (the head is still locked in the
// database, so other processes and other audited writes interleave by batch);
// a write that fails does not take the others with it (the batch is rolled
// back and each write is retried alone, so only the failing one fails).
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
import { AsyncResource } from "node:async_hooks";
import { isCountRefused } from "../auth/deferred-count.js";
import { isRetryableLockError } from "../db/retry.js";
import { isStoreUnavailable } from "../db/unavailable.js";
import { auditCommits } from "../observability/metrics.js";
import type { Knex } from "knex";
import { type Statement, compiled, isStatement, queryOn, runStatement } from "../db/statement.js";
import {
  type AuditEventInput,
  type Write,
  chainRows,
  chainWrites,
  lockChainHead,
  sendInOrder,
  writeChainedEvents,
} from "./audit-log.js";

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
const eventsOf = (done: WriteOutcome<unknown>[]): AuditEventInput[] =>
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

interface Pending {
  write?: AuditedWrite<unknown>;
  bulk?: { kind: BulkKind<unknown, unknown>; item: unknown };
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Runs of a batch that lost a deadlock, at most, before it is split (or its one write fails). */
const LOCK_ATTEMPTS = 4;

/** Writes per transaction at most (bounded statement size and lock time). */
const MAX_BATCH = 200;

/** How long a tenant's guessed head is not used after one turned out stale. */
const GUESS_REST_MS = 1000;

/** A tenant's chain head as this process last read or wrote it. */
export interface ChainHead {
  head: string | null;
  seq: number;
}

/** Consecutive items of one bulk kind, in batch order. */
function runsOf(batch: Pending[]): { kind: BulkKind<unknown, unknown>; items: unknown[] }[] {
  const runs: { kind: BulkKind<unknown, unknown>; items: unknown[] }[] = [];
  for (const p of batch) {
    const last = runs[runs.length - 1];
    if (last && last.kind === p.bulk!.kind) last.items.push(p.bulk!.item);
    else runs.push({ kind: p.bulk!.kind, items: [p.bulk!.item] });
  }
  return runs;
}

class GroupCommitter {
  readonly #queues = new Map<string, Pending[]>();
  readonly #mysql: boolean;
  /** Tenant → the newest head seen (read by admission or left by a commit here). */
  readonly #guesses = new Map<string, ChainHead>();
  /** Tenant → until when its guesses rest after a stale one. */
  readonly #resting = new Map<string, number>();
  /** Batches committed in one round trip on a guessed head, and guesses found stale (tests read them). */
  readonly stats = { guessed: 0, stale: 0 };

  constructor(readonly db: Knex) {
    this.#mysql = db.client.config.client === "mysql2";
  }

  submit<T>(tenantId: string, write: AuditedWrite<T>): Promise<T> {
    // The write runs in its caller's async context, whoever drains the batch: its
    // queries belong to its own request (trace spans, request id), not the drainer's.
    return this.#enqueue(tenantId, { write: AsyncResource.bind(write) });
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
  #guess(tenantId: string): ChainHead | undefined {
    const until = this.#resting.get(tenantId);
    if (until !== undefined) {
      if (Date.now() < until) return undefined;
      this.#resting.delete(tenantId);
    }
    return this.#guesses.get(tenantId);
  }

  /** A bulk item is written with the others of its kind, in the drainer's context (one statement for all). */
  submitBulk<I, T>(tenantId: string, kind: BulkKind<I, T>, item: I): Promise<T> {
    return this.#enqueue(tenantId, { bulk: { kind: kind as BulkKind<unknown, unknown>, item } });
  }

  #enqueue<T>(tenantId: string, work: Pick<Pending, "write" | "bulk">): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queue = this.#queues.get(tenantId);
      const item = { ...work, resolve, reject } as Pending;
      if (queue) {
        queue.push(item);
        return;
      }
      this.#queues.set(tenantId, [item]);
      void this.#drain(tenantId);
    });
  }

  /** Commits the tenant's queue batch after batch until it is empty; one batch in flight per tenant. */
  async #drain(tenantId: string): Promise<void> {
    for (;;) {
      const queue = this.#queues.get(tenantId)!;
      if (queue.length === 0) {
        this.#queues.delete(tenantId);
        return;
      }
      const batch = queue.splice(0, MAX_BATCH);
      await this.#commit(tenantId, batch);
    }
  }

  async #commit(tenantId: string, batch: Pending[], attempt = 1): Promise<void> {
    let values: unknown[];
    try {
      // One round trip when every write is a bulk one without reads and the head is guessed;
      // two when only the first kind reads (a later kind's read must see the earlier kinds' writes).
      const runs = this.#mysql && batch.every((p) => p.bulk) ? runsOf(batch) : null;
      const guess = runs?.every((r) => !r.kind.read || r.kind.planKnown) ? this.#guess(tenantId) : undefined;
      const guessed = runs && guess ? await this.#oneRoundTrip(tenantId, runs, guess) : undefined;
      // Known facts take the place of the locking read: the head alone is read under its lock,
      // and a guarded write that misses its rows undoes the batch, which then reads them.
      const known = runs?.every((r) => !r.kind.read || r.kind.planKnown);
      values =
        guessed ??
        (runs && known ? await this.#twoRoundTrips(tenantId, runs, true) : undefined) ??
        (runs?.every((r, i) => i === 0 || !r.kind.read)
          ? (await this.#twoRoundTrips(tenantId, runs, false))!
          : await this.#inTransaction(tenantId, batch));
      if (!guessed) auditCommits.inc({ way: "locking" });
    } catch (err) {
      // A deadlock's victim was rolled back whole (InnoDB): the same batch again. The
      // operations' rows are also locked by acks and lease renewals, in another order.
      if (isRetryableLockError(err) && attempt < LOCK_ATTEMPTS) {
        await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
        return this.#commit(tenantId, batch, attempt + 1);
      }
      // One write alone, or a database that cannot be reached (each alone would wait out the
      // pool's timeout in turn): every caller gets the error now.
      if (batch.length === 1 || isStoreUnavailable(err)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // Rolled back as a whole: each write alone, so only the one at fault fails.
      for (const p of batch) await this.#commit(tenantId, [p]);
      return;
    }
    batch.forEach((p, i) => p.resolve(values[i]));
  }

  /** Any batch, any database: a knex transaction, each write in turn. */
  #inTransaction(tenantId: string, batch: Pending[]): Promise<unknown[]> {
    return this.db.transaction(async (trx) => {
      const chain = await lockChainHead(trx, tenantId);
      // One after the other, never pipelined: after a deadlock InnoDB has rolled the
      // whole transaction back, and statements already queued behind the failed one
      // would then run in autocommit — rows without their events.
      const done: WriteOutcome<unknown>[] = [];
      const later: Write[] = [];
      for (let i = 0; i < batch.length; ) {
        const p = batch[i]!;
        // What a bulk run left for later goes before the next write: each write sees
        // the ones queued before it as done, as if they had run one by one.
        await sendInOrder(trx, later.splice(0));
        if (p.write) {
          done.push(await p.write(trx));
          i++;
          continue;
        }
        let j = i;
        while (j < batch.length && batch[j]!.bulk?.kind === p.bulk!.kind) j++;
        const items = batch.slice(i, j).map((q) => q.bulk!.item);
        const read = p.bulk!.kind.read?.(trx, items);
        const rows = read ? await (isStatement(read) ? runStatement(trx, read) : read) : [];
        const out = p.bulk!.kind.plan(trx, items, rows as unknown[]);
        done.push(...out.outcomes);
        later.push(...out.writes);
        i = j;
      }
      const events = eventsOf(done);
      if (events.some((e) => e.tenantId !== tenantId))
        throw new Error("audit: the event belongs to another tenant's chain");
      await writeChainedEvents(trx, chain, events, later);
      return done.map((d) => d.value);
    });
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
  async #twoRoundTrips(
    tenantId: string,
    runs: { kind: BulkKind<unknown, unknown>; items: unknown[] }[],
    known: boolean,
  ): Promise<unknown[] | undefined> {
    const db = this.db;
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
      this.note(tenantId, { head: chained.head, seq: chained.seq });
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
  async #oneRoundTrip(
    tenantId: string,
    runs: { kind: BulkKind<unknown, unknown>; items: unknown[] }[],
    guess: ChainHead,
  ): Promise<unknown[] | undefined> {
    const db = this.db;
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
      this.stats.guessed++;
      auditCommits.inc({ way: "guessed" });
      this.note(tenantId, { head: chained.head, seq: chained.seq });
      return done.map((d) => d.value);
    } catch (err) {
      if (!open) throw err;
      // Stale (the next seq is taken), or any other refusal: rolled back below, then the locking way.
      // A start's count refused by its guard (auth/deferred-count.ts) is the batch's, not the guess's.
      if (isStoreUnavailable(err) || isCountRefused(err)) throw err;
      this.stats.stale++;
      auditCommits.inc({ way: "stale" });
      this.#guesses.delete(tenantId);
      this.#resting.set(tenantId, Date.now() + GUESS_REST_MS);
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

/** Tenants whose guessed heads one process keeps at most. */
const MAX_GUESSES = 10_000;

const committers = new WeakMap<Knex, GroupCommitter>();

function committerOf(db: Knex): GroupCommitter {
  let committer = committers.get(db);
  if (!committer) {
    committer = new GroupCommitter(db);
    committers.set(db, committer);
  }
  return committer;
}

/**
 * A tenant's chain head as just read (outside any lock): the guess that lets
 * its next batch of operations commit in one round trip. A stale guess costs
 * only a retry the locking way; it can never fork the chain.
 */
export function noteChainHead(db: Knex, tenantId: string, head: ChainHead): void {
  committerOf(db).note(tenantId, head);
}

/** The tenant's chain head as this process last read or wrote it (what a job tells its gateway). */
export function chainHeadGuess(db: Knex, tenantId: string): ChainHead | undefined {
  return committerOf(db).guessOf(tenantId);
}

/** Batches committed on a guessed head, and guesses found stale, in this process (for tests). */
export function guessStats(db: Knex): { guessed: number; stale: number } {
  return committerOf(db).stats;
}

/**
 * Runs `write` in a transaction that holds `tenantId`'s chain head, appends the
 * event it returns, and resolves with its value once committed — batched with
 * the other audited writes of this process for the same tenant.
 */
export function commitAudited<T>(db: Knex, tenantId: string, write: AuditedWrite<T>): Promise<T> {
  return committerOf(db).submit(tenantId, write);
}

/**
 * As commitAudited, for a write that `writer` can make together with the
 * others of its kind queued at the same time (one statement for a batch
 * instead of one per write). The same guarantees: answered once committed,
 * a failing item retried alone so only it fails.
 */
export function commitAuditedBulk<I, T>(
  db: Knex,
  tenantId: string,
  kind: BulkKind<I, T>,
  item: I,
): Promise<T> {
  return committerOf(db).submitBulk(tenantId, kind, item);
}

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
// The MySQL ways of a batch of bulk writes, and the guessed chain head that saves
// them a round trip, are in group-commit-mysql.ts; what a write is, in audited-write.ts.
import { AsyncResource } from "node:async_hooks";
import { isRetryableLockError } from "../db/retry.js";
import { isStoreUnavailable } from "../db/unavailable.js";
import { auditCommits } from "../observability/metrics.js";
import type { Knex } from "knex";
import { isStatement, runStatement } from "../db/statement.js";
import { type Write, lockChainHead, sendInOrder, writeChainedEvents } from "./audit-log.js";
import { type AuditedWrite, type BulkKind, type WriteOutcome, eventsOf } from "./audited-write.js";
import { type ChainHead, HeadGuesses, oneRoundTrip, twoRoundTrips } from "./group-commit-mysql.js";

export type { AuditedWrite, BulkKind, WriteOutcome } from "./audited-write.js";
export type { ChainHead } from "./group-commit-mysql.js";

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
  readonly heads: HeadGuesses;

  constructor(readonly db: Knex) {
    this.#mysql = db.client.config.client === "mysql2";
    this.heads = new HeadGuesses(this.#mysql);
  }

  submit<T>(tenantId: string, write: AuditedWrite<T>): Promise<T> {
    // The write runs in its caller's async context, whoever drains the batch: its
    // queries belong to its own request (trace spans, request id), not the drainer's.
    return this.#enqueue(tenantId, { write: AsyncResource.bind(write) });
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
      const guess = runs?.every((r) => !r.kind.read || r.kind.planKnown)
        ? this.heads.guess(tenantId)
        : undefined;
      const guessed =
        runs && guess ? await oneRoundTrip(this.db, this.heads, tenantId, runs, guess) : undefined;
      // Known facts take the place of the locking read: the head alone is read under its lock,
      // and a guarded write that misses its rows undoes the batch, which then reads them.
      const known = runs?.every((r) => !r.kind.read || r.kind.planKnown);
      values =
        guessed ??
        (runs && known ? await twoRoundTrips(this.db, this.heads, tenantId, runs, true) : undefined) ??
        (runs?.every((r, i) => i === 0 || !r.kind.read)
          ? (await twoRoundTrips(this.db, this.heads, tenantId, runs, false))!
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
}

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
  committerOf(db).heads.note(tenantId, head);
}

/** The tenant's chain head as this process last read or wrote it (what a job tells its gateway). */
export function chainHeadGuess(db: Knex, tenantId: string): ChainHead | undefined {
  return committerOf(db).heads.guessOf(tenantId);
}

/** Batches committed on a guessed head, and guesses found stale, in this process (for tests). */
export function guessStats(db: Knex): { guessed: number; stale: number } {
  return committerOf(db).heads.stats;
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

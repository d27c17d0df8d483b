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
import { AsyncResource } from "node:async_hooks";
import type { Knex } from "knex";
import { type AuditEventInput, lockChainHead, writeChainedEvents } from "./audit-log.js";

/** One audited write: its rows, then the event that records it (null: nothing to audit, e.g. a lost race). */
export type AuditedWrite<T> = (trx: Knex.Transaction) => Promise<{ event: AuditEventInput | null; value: T }>;

interface Pending {
  write: AuditedWrite<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

/** Writes per transaction at most (bounded statement size and lock time). */
const MAX_BATCH = 200;

class GroupCommitter {
  readonly #queues = new Map<string, Pending[]>();

  constructor(readonly db: Knex) {}

  submit<T>(tenantId: string, write: AuditedWrite<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queue = this.#queues.get(tenantId);
      // The write runs in its caller's async context, whoever drains the batch: its
      // queries belong to its own request (trace spans, request id), not the drainer's.
      const item = { write: AsyncResource.bind(write), resolve, reject } as Pending;
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

  async #commit(tenantId: string, batch: Pending[]): Promise<void> {
    let values: unknown[];
    try {
      values = await this.db.transaction(async (trx) => {
        const chain = await lockChainHead(trx, tenantId);
        // One after the other, never pipelined: after a deadlock InnoDB has rolled the
        // whole transaction back, and statements already queued behind the failed one
        // would then run in autocommit — rows without their events.
        const done: Awaited<ReturnType<AuditedWrite<unknown>>>[] = [];
        for (const p of batch) done.push(await p.write(trx));
        const events = done.flatMap((d) => (d.event ? [d.event] : []));
        if (events.some((e) => e.tenantId !== tenantId))
          throw new Error("audit: the event belongs to another tenant's chain");
        await writeChainedEvents(trx, chain, events);
        return done.map((d) => d.value);
      });
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      // Rolled back as a whole: each write alone, so only the one at fault fails.
      for (const p of batch) await this.#commit(tenantId, [p]);
      return;
    }
    batch.forEach((p, i) => p.resolve(values[i]));
  }
}

const committers = new WeakMap<Knex, GroupCommitter>();

/**
 * Runs `write` in a transaction that holds `tenantId`'s chain head, appends the
 * event it returns, and resolves with its value once committed — batched with
 * the other audited writes of this process for the same tenant.
 */
export function commitAudited<T>(db: Knex, tenantId: string, write: AuditedWrite<T>): Promise<T> {
  let committer = committers.get(db);
  if (!committer) {
    committer = new GroupCommitter(db);
    committers.set(db, committer);
  }
  return committer.submit(tenantId, write);
}

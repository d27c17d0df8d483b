// An operation's final state: the row's update and its `operation.completed`
// event in one audited commit (batched with the other completions of the
// process: audit/group-commit.ts), with what the operation's kind records
// beside it (a completion hook) or what its caller asked to be settled with it.
// The operation's start, reads and leases are in store.ts.
import { JobResult } from "@relayctl/proto";
import type { Knex } from "knex";
import type { AuditEventInput, Write } from "../audit/audit-log.js";
import { type BulkKind, type WriteOutcome, commitAudited, commitAuditedBulk } from "../audit/group-commit.js";
import { resultHash } from "../audit/result-hash.js";
import { type Statement, isMysql, placeholders } from "../db/statement.js";
import type { FinalResult } from "./store.js";

/** The stored form of a result's detail: canonical proto JSON of JobResult.detail. */
function encodeDetail(detail: JobResult["detail"]): string | null {
  return detail ? JSON.stringify(JobResult.toJSON(JobResult.fromPartial({ detail }))) : null;
}

interface FinishingRow {
  tenant_id: string;
  server_id: string;
  run_id: string | null;
  operation_type: string;
  started_at: number | string;
}

type Detail = NonNullable<JobResult["detail"]>;

/**
 * What an operation kind writes with its final state, in the same transaction
 * (a deployment's steps and commit: deployments/service.ts registers it), so
 * this generic layer knows no kind. Keyed by the result detail's `$case`.
 */
export type CompletionHook = (trx: Knex.Transaction, operationId: string, detail: Detail) => Promise<void>;
export type CompletionHooks = ReadonlyMap<string, CompletionHook>;
const NO_HOOKS: CompletionHooks = new Map();

/** What finishOperation tells of the operation it ended (for metrics). */
export interface FinishedOperation {
  operationType: string;
  startedAt: number;
  /** The settlement was stored with the final state. */
  settled: boolean;
}

/**
 * What the job's caller asked to be stored with the operation's final state
 * (OperationService.onSettle: an external-deploy sync's given-back claims and
 * audit event), given the result: its events are chained right after
 * the completion event, its writes go in the same commit. Never without the
 * final state: an operation no longer running stores neither.
 */
export interface Settlement {
  events: AuditEventInput[];
  /** Built on the commit's own connection or transaction. */
  writes: (q: Knex | Knex.Transaction) => Write[];
}

/** Makes a settlement from the caller's plan (as the job's hint carried it: not yet checked) and the result. */
export type Settler = (c: {
  operationId: string;
  tenantId: string;
  serverId: string;
  plan: unknown;
  result: FinalResult;
}) => Settlement | undefined;

/**
 * Moves a running operation to its final state. Returns null when it was no
 * longer running (already finished, swept, or a duplicate report). The update
 * that wins appends, in the same transaction, the `operation.completed` audit
 * event carrying the hash of the result (audit/result-hash.ts): exactly one per
 * operation, and the stored result can be checked against the chain.
 */
export async function finishOperation(
  db: Knex,
  id: string,
  r: FinalResult,
  serverId?: string,
  /** The operation's tenant when the caller knows it (an agent's stream): saves a read before the batch. */
  tenantId?: string,
  hooks: CompletionHooks = NO_HOOKS,
  /** What the operation's row holds, as its gateway was told with the job: may save the row's read. */
  known?: KnownOperation,
  /** Stored with the final state (not on the completion-hook way: that kind's answer is then unsettled). */
  settlement?: Settlement,
): Promise<FinishedOperation | null> {
  const where = { id, status: "running", ...(serverId ? { server_id: serverId } : {}) };
  const read = (q: Knex) =>
    q("operations")
      .where(where)
      .first<FinishingRow | undefined>("tenant_id", "server_id", "run_id", "operation_type", "started_at");
  let tenant = tenantId;
  if (tenant === undefined) {
    const found = await read(db);
    if (!found) return null;
    tenant = found.tenant_id;
  }
  // Integer columns: store and hash the same numbers.
  const result = { ...r, exit_code: Math.round(r.exit_code), duration_ms: Math.round(r.duration_ms) };
  const detail = result.detail;
  const hook = detail && hooks.get(detail.$case);
  if (!detail || !hook) {
    if (known && serverId)
      return commitAuditedBulk(db, tenant, finishKnownOperations, {
        id,
        serverId,
        tenant,
        result,
        known,
        settlement,
      });
    return commitAuditedBulk(db, tenant, finishOperations, { id, serverId, tenant, result, settlement });
  }
  return commitAudited<FinishedOperation | null>(db, tenant, async (trx) => {
    const op = await read(trx);
    if (!op || op.tenant_id !== tenant) return { event: null, value: null };
    const n = await trx("operations").where(where).update(finalColumns(result));
    if (n !== 1) return { event: null, value: null };
    // What the kind records (a deployment's steps and commit) lands with the final state, never apart.
    await hook(trx, id, detail);
    return {
      event: completionEvent(id, op, result),
      value: { operationType: op.operation_type, startedAt: Number(op.started_at), settled: false },
    };
  });
}

function finalColumns(result: FinalResult, now = Date.now()) {
  return {
    status: result.status,
    delivery: "finished",
    exit_code: result.exit_code,
    stdout: result.stdout,
    stderr: result.stderr,
    duration_ms: result.duration_ms,
    error: result.error ?? null,
    result_detail: encodeDetail(result.detail),
    completed_at: now,
  };
}

interface Finishing {
  id: string;
  serverId: string | undefined;
  tenant: string;
  result: FinalResult;
  settlement?: Settlement;
}

const SELECT_FINISHING =
  "SELECT `id`, `tenant_id`, `server_id`, `run_id`, `operation_type`, `started_at` FROM `operations`";

/**
 * Operations finished together: one locking read of all that are still
 * running, then their updates and completion events in one round trip (MySQL).
 * A row read here is locked until the commit, so each of its updates moves it;
 * an operation no longer running (or of another server or tenant) gets null,
 * and two reports of one operation in the same batch: only the first wins.
 */
const finishOperations: BulkKind<Finishing, FinishedOperation | null> = {
  read: (db, items) => {
    const ids = [...new Set(items.map((i) => i.id))];
    const lock = isMysql(db) ? " FOR UPDATE" : "";
    return {
      sql: `${SELECT_FINISHING} WHERE \`id\` IN (${placeholders(ids.length)}) AND \`status\` = ?${lock}`,
      bindings: [...ids, "running"],
    };
  },
  plan: (db, items, rows) => {
    const running = new Map((rows as (FinishingRow & { id: string })[]).map((r) => [r.id, r]));
    const finals: { key: string; values: Record<string, unknown> }[] = [];
    const settled: Write[] = [];
    const now = Date.now(); // one completion time for the batch: a column set once
    const outcomes = items.map((i): WriteOutcome<FinishedOperation | null> => {
      const op = running.get(i.id);
      if (!op || op.tenant_id !== i.tenant || (i.serverId && op.server_id !== i.serverId))
        return { event: null, value: null };
      running.delete(i.id); // a second report of it in this batch finds it finished
      finals.push({ key: i.id, values: finalColumns(i.result, now) });
      if (i.settlement) settled.push(...i.settlement.writes(db));
      return {
        event: completionEvent(i.id, op, i.result),
        more: i.settlement?.events,
        value: {
          operationType: op.operation_type,
          startedAt: Number(op.started_at),
          settled: !!i.settlement,
        },
      };
    });
    // One statement for the batch: each row locked above, still running, gets its own result.
    const writes = finals.length > 0 ? [finishRows(finals).statement, ...settled] : [];
    return { outcomes, writes };
  },
};

/** What an operation's row holds that its completion event and metrics need (dispatch.ts carries it). */
export interface KnownOperation {
  operationType: string;
  startedAt: number;
  runId: string | null;
}

/**
 * As finishOperations, and on a guessed chain head without the locking read:
 * the update moves only rows still running that hold exactly the facts the
 * events were made from, and must move every one of them, or nothing of the
 * batch commits and it goes the locking way (finishOperations' read and plan).
 */
const finishKnownOperations: BulkKind<
  Finishing & { serverId: string; known: KnownOperation },
  FinishedOperation | null
> = {
  read: finishOperations.read,
  plan: finishOperations.plan,
  planKnown: (db, items) => {
    const seen = new Set<string>();
    const finals: { key: string; values: Record<string, unknown> }[] = [];
    const facts: Record<string, unknown>[] = [];
    const settled: { write: Write }[] = [];
    const now = Date.now();
    const outcomes = items.map((i): WriteOutcome<FinishedOperation | null> => {
      if (seen.has(i.id)) return { event: null, value: null }; // a second report in the batch: the first wins
      seen.add(i.id);
      finals.push({ key: i.id, values: finalColumns(i.result, now) });
      const { runId, operationType, startedAt } = i.known;
      facts.push({
        tenant_id: i.tenant,
        server_id: i.serverId,
        operation_type: operationType,
        started_at: startedAt,
        "COALESCE(`run_id`, '')": runId ?? "",
      });
      const op = { tenant_id: i.tenant, server_id: i.serverId, run_id: runId };
      // After the guarded update: a batch whose rows are not as told stops before them.
      for (const write of i.settlement?.writes(db) ?? []) settled.push({ write });
      return {
        event: completionEvent(i.id, op, i.result),
        more: i.settlement?.events,
        value: { operationType, startedAt, settled: !!i.settlement },
      };
    });
    const { statement, rows } = finishRows(finals, facts);
    return { outcomes, writes: [{ write: statement, rows }, ...settled] };
  },
};

/** `col = ?` for a value every row shares, else `col = CASE id WHEN ? THEN ? ... END`. */
function sameForAll(values: unknown[]): boolean {
  const first = values[0] ?? null;
  return values.every((v) => (v ?? null) === first);
}

/**
 * The final state of running operations, each row its own, in one UPDATE by id: a column
 * whose value all rows share is set once (`c = ?`), the others by `CASE id WHEN ? THEN ?`
 * (most of a batch's columns are shared: delivery, error, completed_at, often status, exit
 * code and output), which spares MariaDB's parser most of the batch's literals. With `facts`
 * (each row's, in order: what its completion event was made from), only a row that holds
 * exactly its own facts moves: facts every row shares as `c = ?`, the rest as a tuple per row
 * beside its id. `rows` is how many rows the update must move (one per final).
 */
function finishRows(
  finals: { key: string; values: Record<string, unknown> }[],
  facts?: Record<string, unknown>[],
): { statement: Statement; rows: number } {
  const ids = finals.map((f) => f.key);
  const sets: string[] = [];
  const bindings: unknown[] = [];
  const whens = finals.map(() => "WHEN ? THEN ?").join(" ");
  for (const c of Object.keys(finals[0]!.values)) {
    const values = finals.map((f) => f.values[c] ?? null);
    if (sameForAll(values)) {
      sets.push(`\`${c}\` = ?`);
      bindings.push(values[0]);
      continue;
    }
    sets.push(`\`${c}\` = CASE \`id\` ${whens} END`);
    finals.forEach((f, i) => bindings.push(f.key, values[i]));
  }
  const where = [`\`id\` IN (${placeholders(ids.length)})`, "`status` = ?"];
  bindings.push(...ids, "running");
  if (facts) {
    const own = ["`id`"];
    const columns = Object.keys(facts[0]!);
    const varying = columns.filter((c) => !sameForAll(facts.map((f) => f[c])));
    for (const c of columns) {
      if (varying.includes(c)) continue;
      where.push(`${c.startsWith("COALESCE") ? c : `\`${c}\``} = ?`);
      bindings.push(facts[0]![c] ?? null);
    }
    own.push(...varying.map((c) => (c.startsWith("COALESCE") ? c : `\`${c}\``)));
    const tuple = `(${placeholders(own.length)})`;
    where.push(`(${own.join(", ")}) IN (${finals.map(() => tuple).join(", ")})`);
    finals.forEach((f, i) => bindings.push(f.key, ...varying.map((c) => facts[i]![c] ?? null)));
  }
  return {
    statement: { sql: `UPDATE \`operations\` SET ${sets.join(", ")} WHERE ${where.join(" AND ")}`, bindings },
    rows: finals.length,
  };
}

function completionEvent(
  id: string,
  op: { tenant_id: string; server_id: string; run_id: string | null },
  r: FinalResult,
): AuditEventInput {
  return {
    tenantId: op.tenant_id,
    eventType: "operation.completed",
    operationId: id,
    serverId: op.server_id,
    runId: op.run_id,
    // Keys in code-unit order: the chain's canonical JSON of them is one JSON.stringify (audit-log.ts).
    payload: {
      duration_ms: r.duration_ms,
      exit_code: r.exit_code,
      operation_id: id,
      result_hash: resultHash(r),
      status: r.status,
      stderr_bytes: Buffer.byteLength(r.stderr),
      stdout_bytes: Buffer.byteLength(r.stdout),
    },
  };
}

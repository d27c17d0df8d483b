// The operations table: the record of every operation and the durable state of
// its delivery. A row and its audit event are written in one transaction before
// anything is dispatched; results land here before anyone is told (finish.ts
// writes them).
import { randomUUID } from "node:crypto";
import { JobResult } from "@relayctl/proto";
import type { Knex } from "knex";
import type { AuditEventInput } from "../audit/audit-log.js";
import { type BulkKind, commitAudited, commitAuditedBulk } from "../audit/group-commit.js";
import { insertRows } from "../db/statement.js";
import { isStoreUnavailable } from "../db/unavailable.js";
import { RcError } from "../errors.js";
import type { OperationType } from "./types.js";
import type { JobStart } from "../bus/job-start.js";
import { CountRefusedError, countStatements, isCountRefused } from "../auth/deferred-count.js";

export type OperationStatus = "running" | "completed" | "failed" | "timeout";
export type FinalStatus = Exclude<OperationStatus, "running">;

export interface NewOperation {
  tenantId: string;
  serverId: string;
  operationType: OperationType;
  keyId: string | null;
  runId: string | null;
  /** null: no lease (a reboot: the agent cannot heartbeat while the machine restarts). */
  leaseMs: number | null;
  deadlineAt: number;
  /** The server's boot id when a reboot was asked for. */
  preBootId?: string | null;
  audit: AuditEventInput["payload"];
  /** Rows that belong to the operation (a deployment's), written in its transaction. */
  together?: (trx: Knex.Transaction, id: string, startedAt: number) => Knex.QueryBuilder[];
}

export interface FinalResult {
  status: FinalStatus;
  exit_code: number;
  stdout: string;
  stderr: string;
  duration_ms: number;
  error?: string | null;
  /** The structured outcome of job kinds that have one (a route sync's report). */
  detail?: JobResult["detail"];
}

/** What a caller reads of a finished operation. */
export interface OperationResult {
  exit_code: number;
  stdout: string;
  stderr: string;
  duration_ms: number;
}

/** A result's detail as stored (finish.ts's encodeDetail): canonical proto JSON of JobResult.detail. */
function decodeDetail(stored: string | null | undefined): JobResult["detail"] {
  return stored ? JobResult.fromJSON(JSON.parse(stored)).detail : undefined;
}

/** The row and the start event of a new operation (its id made here), not yet written. */
export function buildOperation(op: Omit<NewOperation, "together">): JobStart {
  const id = randomUUID();
  const startedAt = Date.now();
  const row: JobStart["row"] = {
    id,
    tenant_id: op.tenantId,
    server_id: op.serverId,
    operation_type: op.operationType,
    status: "running",
    delivery: "pending",
    key_id: op.keyId,
    run_id: op.runId,
    lease_expires_at: op.leaseMs === null ? null : startedAt + op.leaseMs,
    deadline_at: op.deadlineAt,
    pre_boot_id: op.preBootId ?? null,
    started_at: startedAt,
  };
  const event: AuditEventInput = {
    tenantId: op.tenantId,
    eventType: `operation.${op.operationType}`,
    operationId: id,
    keyId: op.keyId,
    serverId: op.serverId,
    runId: op.runId,
    payload: { operation_id: id, ...op.audit },
  };
  return { row, event };
}

/** Fail closed: no audited row, nothing runs. Only an unreachable database is "retry later" (503). */
function storeError(err: unknown): unknown {
  // Anything else is a bug, a 500 with its cause logged.
  return isStoreUnavailable(err) ? new RcError("RC_ERR_STORE_UNAVAILABLE", undefined, { cause: err }) : err;
}

/** Inserts the operation and its audit event atomically; returns the new id. */
export async function createOperation(
  db: Knex,
  op: NewOperation,
): Promise<{ id: string; startedAt: number }> {
  const start = buildOperation(op);
  const { row, event } = start;
  const { id, started_at: startedAt } = row;
  try {
    // Group commit (audit/group-commit.ts): answered once the row and its event are committed.
    if (op.together) {
      const together = op.together;
      await commitAudited(db, op.tenantId, async (trx) => {
        for (const w of [trx("operations").insert(row), ...together(trx, id, startedAt)]) await w;
        return { event, value: undefined };
      });
    } else {
      await commitAuditedBulk(db, op.tenantId, insertOperations, start);
    }
  } catch (err) {
    throw storeError(err);
  }
  return { id, startedAt };
}

/**
 * Commits a start built by buildOperation (the gateway's, for the api that sent
 * it with the job, or the api's own when the gateway did not). `started` when
 * this commit wrote it, `already` when its row was there (the other side's
 * commit came first: one row, one start event, whoever wrote them).
 */
export async function commitStart(db: Knex, start: JobStart): Promise<"started" | "already"> {
  try {
    await commitAuditedBulk(db, start.event.tenantId, insertOperations, start);
    return "started";
  } catch (err) {
    // Its count's guard: nothing committed; the request is to be admitted the full way.
    if (isCountRefused(err)) throw new CountRefusedError(err);
    if (
      (err as { errno?: number } | null)?.errno === 1062 ||
      (err as { code?: string }).code === "SQLITE_CONSTRAINT_PRIMARYKEY"
    ) {
      const row = await db("operations").where({ id: start.row.id }).first("server_id", "started_at");
      if (row?.server_id === start.row.server_id && Number(row.started_at) === start.row.started_at)
        return "already";
    }
    throw storeError(err);
  }
}

/**
 * The operations started together: one multi-row insert, sent with their events. The
 * counts of starts that carry one come after it (auth/deferred-count.ts): a start
 * already committed by the other side stops the batch at its row, before its count.
 */
const insertOperations: BulkKind<JobStart, undefined> = {
  plan: (_db, items) => {
    const counts = items.flatMap((i) => (i.count ? [i.count] : []));
    return {
      outcomes: items.map((i) => ({ event: i.event, value: undefined })),
      // SQLite's bound-parameter cap: 12 columns x 200 rows (the largest batch) fits. A nullable
      // column no row of the batch fills is left to its default (NULL): fewer literals to parse.
      writes: [
        insertRows(
          "operations",
          OPERATION_COLUMNS.filter((c) => !DEFAULT_NULL.has(c) || items.some((i) => i.row[c] != null)),
          items.map((i) => i.row),
        ),
        ...countStatements(counts),
      ],
    };
  },
};

/** Columns of an operation's row that are NULL when not written (migrations 001 and 004). */
const DEFAULT_NULL = new Set<string>(["key_id", "run_id", "lease_expires_at", "pre_boot_id"]);

/** The columns createOperation writes (its `row`); a route sync's start writes the same (external-deploy/claim-start.ts). */
export const OPERATION_COLUMNS = [
  "id",
  "tenant_id",
  "server_id",
  "operation_type",
  "status",
  "delivery",
  "key_id",
  "run_id",
  "lease_expires_at",
  "deadline_at",
  "pre_boot_id",
  "started_at",
] as const;

/** The stored result of a finished operation (and its detail, when it has one). */
export async function readResult(
  db: Knex,
  id: string,
): Promise<OperationResult & { detail: JobResult["detail"] }> {
  const row = await db("operations").where({ id }).first<{
    exit_code: number | null;
    stdout: string | null;
    stderr: string | null;
    duration_ms: number | null;
    error: string | null;
    result_detail: string | null;
  }>("exit_code", "stdout", "stderr", "duration_ms", "error", "result_detail");
  return {
    exit_code: row?.exit_code ?? -1,
    stdout: row?.stdout ?? "",
    stderr: row?.stderr ?? row?.error ?? "",
    duration_ms: row?.duration_ms ?? 0,
    detail: decodeDetail(row?.result_detail),
  };
}

/** Gives a running operation its first lease (one started without: a deploy waiting for its turn). */
export async function startLease(db: Knex, id: string, leaseMs: number): Promise<void> {
  await db("operations")
    .where({ id, status: "running" })
    .update({ lease_expires_at: Date.now() + leaseMs });
}

/** Records agents' acks; only operations of the acking agent's own server move. */
export async function markAcked(db: Knex, serverId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db("operations")
    .where({ server_id: serverId, delivery: "pending" })
    .whereIn("id", ids)
    .update({ delivery: "acked" });
}

export async function renewLeases(db: Knex, serverId: string, ids: string[], leaseMs: number): Promise<void> {
  if (ids.length === 0) return;
  await db("operations")
    .where({ server_id: serverId, status: "running" })
    .whereIn("id", ids)
    .whereNotNull("lease_expires_at") // lease-free operations (reboot) stay lease-free
    .update({ lease_expires_at: Date.now() + leaseMs });
}

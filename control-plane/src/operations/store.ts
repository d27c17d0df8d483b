// The operations table: the record of every operation and the durable state of
// its delivery. A row and its audit event are written in one transaction before
// anything is dispatched; results land here before anyone is told.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { type AuditEventInput, appendAuditEvent, appendAuditEventAfter } from "../audit/audit-log.js";
import { resultHash } from "../audit/result-hash.js";
import { RcError } from "../errors.js";

export type OperationStatus = "running" | "completed" | "failed" | "timeout";
export type FinalStatus = Exclude<OperationStatus, "running">;

export interface NewOperation {
  tenantId: string;
  serverId: string;
  operationType: string;
  keyId: string | null;
  runId: string | null;
  /** null: no lease (a reboot: the agent cannot heartbeat while the machine restarts). */
  leaseMs: number | null;
  deadlineAt: number;
  /** The server's boot id when a reboot was asked for. */
  preBootId?: string | null;
  audit: AuditEventInput["payload"];
}

export interface FinalResult {
  status: FinalStatus;
  exit_code: number;
  stdout: string;
  stderr: string;
  duration_ms: number;
  error?: string | null;
}

/** Inserts the operation and its audit event atomically; returns the new id. */
export async function createOperation(
  db: Knex,
  op: NewOperation,
): Promise<{ id: string; startedAt: number }> {
  const id = randomUUID();
  const startedAt = Date.now();
  try {
    await db.transaction(async (trx) => {
      const insertOperation = trx("operations").insert({
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
      });
      await appendAuditEvent(
        trx,
        {
          tenantId: op.tenantId,
          eventType: `operation.${op.operationType}`,
          operationId: id,
          keyId: op.keyId,
          serverId: op.serverId,
          runId: op.runId,
          payload: { operation_id: id, ...op.audit },
        },
        [insertOperation],
      );
    });
  } catch (err) {
    // Fail closed: no audited row, nothing runs.
    throw new RcError("RC_ERR_STORE_UNAVAILABLE", undefined, { cause: err });
  }
  return { id, startedAt };
}

/**
 * Moves a running operation to its final state. Returns false when it was no
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
): Promise<boolean> {
  const where = { id, status: "running", ...(serverId ? { server_id: serverId } : {}) };
  const op = await db("operations")
    .where(where)
    .first<{ tenant_id: string; server_id: string; run_id: string | null } | undefined>(
      "tenant_id",
      "server_id",
      "run_id",
    );
  if (!op) return false;
  // Integer columns: store and hash the same numbers.
  const result = { ...r, exit_code: Math.round(r.exit_code), duration_ms: Math.round(r.duration_ms) };
  return db.transaction((trx) =>
    appendAuditEventAfter(trx, op.tenant_id, async () => {
      const n = await trx("operations")
        .where(where)
        .update({
          status: result.status,
          delivery: "finished",
          exit_code: result.exit_code,
          stdout: result.stdout,
          stderr: result.stderr,
          duration_ms: result.duration_ms,
          error: result.error ?? null,
          completed_at: Date.now(),
        });
      return n === 1 ? completionEvent(id, op, result) : null;
    }),
  );
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
    payload: {
      operation_id: id,
      status: r.status,
      exit_code: r.exit_code,
      duration_ms: r.duration_ms,
      stdout_bytes: Buffer.byteLength(r.stdout),
      stderr_bytes: Buffer.byteLength(r.stderr),
      result_hash: resultHash(r),
    },
  };
}

export async function markDelivery(db: Knex, ids: string[], delivery: "dispatched" | "acked"): Promise<void> {
  if (ids.length === 0) return;
  await db("operations")
    .whereIn("id", ids)
    .whereIn("delivery", delivery === "acked" ? ["pending", "dispatched"] : ["pending"])
    .update({ delivery });
}

export async function renewLeases(db: Knex, serverId: string, ids: string[], leaseMs: number): Promise<void> {
  if (ids.length === 0) return;
  await db("operations")
    .where({ server_id: serverId, status: "running" })
    .whereIn("id", ids)
    .whereNotNull("lease_expires_at") // lease-free operations (reboot) stay lease-free
    .update({ lease_expires_at: Date.now() + leaseMs });
}

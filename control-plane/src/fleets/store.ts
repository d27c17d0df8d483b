// The rollouts and rollout_servers rows (migration 027) and how callers read
// them. A rollout claims its application first (active_application_id, unique):
// a second rollout of the application is a 409 on any api instance. A claim
// whose operation is no longer running (its api instance stopped, the sweeper
// ended the operation at its deadline) is stale and released by the next claim.
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { isDuplicate } from "../github/sql.js";
import { iso } from "../lib/time.js";
import type { ServerRef } from "../servers/servers.js";
import type { Strategy } from "./strategy.js";

export type RolloutStatus = "running" | "succeeded" | "halted" | "failed";
export type ServerState =
  | "pending"
  | "deploying"
  | "succeeded"
  | "failed"
  | "rolling_back"
  | "rolled_back"
  | "rollback_failed"
  | "skipped";

export interface RolloutRow {
  id: string;
  tenant_id: string;
  application_id: string;
  operation_id: string;
  kind: "deploy" | "rollback";
  strategy: string;
  status: RolloutStatus;
  detail: string | null;
  run_id: string | null;
  deadline_at: number;
  created_at: number;
  finished_at: number | null;
}

export interface RolloutServerRow {
  rollout_id: string;
  server_id: string;
  server_name: string;
  position: number;
  batch: number;
  state: ServerState;
  deployment_id: string | null;
  rollback_deployment_id: string | null;
  failed_step: string | null;
  detail: string | null;
  updated_at: number;
}

/**
 * How long a claim may go without its operation before it counts as stale: the claim is
 * inserted, then the operation is started (a commit, milliseconds); only an instance that
 * stopped in between leaves a claim without one for longer.
 */
const UNRECORDED_CLAIM_MS = 60_000;

/**
 * Releases claims of the application whose operation is no longer running, or was never
 * recorded and will not be. A claim whose operation is still being started is not stale: a
 * second deploy in that window used to take the application from it (a fleets test in CI
 * saw the second rollout start beside the first) and now gets the 409.
 */
async function releaseStale(db: Knex, applicationId: string, now = Date.now()): Promise<void> {
  const claim = await db("rollouts as r")
    .leftJoin("operations as o", "o.id", "r.operation_id")
    .where({ "r.active_application_id": applicationId })
    .first<{ id: string; status: string | null; created_at: number | string } | undefined>(
      "r.id",
      "o.status",
      "r.created_at",
    );
  if (!claim || claim.status === "running") return;
  if (claim.status === null && now - Number(claim.created_at) < UNRECORDED_CLAIM_MS) return;
  await db("rollouts").where({ id: claim.id, active_application_id: applicationId }).update({
    active_application_id: null,
    status: "failed",
    detail: "its driver stopped before the rollout finished (the control plane instance stopped)",
    finished_at: Date.now(),
  });
}

/**
 * Claims the application for a new rollout, or 409 naming the running one. The
 * row's operation_id is its own id until the operation is recorded (setOperation).
 */
export async function claimRollout(
  db: Knex,
  r: Omit<RolloutRow, "operation_id" | "status" | "detail" | "finished_at">,
  strategy: Strategy,
): Promise<void> {
  await releaseStale(db, r.application_id);
  try {
    await db("rollouts").insert({
      ...r,
      strategy: JSON.stringify(strategy),
      operation_id: r.id,
      active_application_id: r.application_id,
      status: "running",
    });
  } catch (err) {
    if (!isDuplicate(err)) throw err;
    const running = await db("rollouts")
      .where({ active_application_id: r.application_id })
      .first<{ id: string } | undefined>("id");
    throw new RcError(
      "RC_ERR_ROLLOUT_RUNNING",
      `a rollout of this application is running (${running?.id ?? "just started"}): wait for it to finish`,
      { cause: err, extra: running ? { rollout_id: running.id } : {} },
    );
  }
}

/** Drops a claim whose operation could not be recorded. */
export const dropClaim = (db: Knex, id: string) => db("rollouts").where({ id }).delete();

/** The rows written with the rollout's operation (its transaction). */
export function rolloutRows(
  trx: Knex.Transaction,
  id: string,
  operationId: string,
  targets: ServerRef[],
  batchOf: number[],
  deploymentIds: string[],
  now: number,
): Knex.QueryBuilder[] {
  return [
    trx("rollouts").where({ id }).update({ operation_id: operationId }),
    trx("rollout_servers").insert(
      targets.map((s, i) => ({
        rollout_id: id,
        server_id: s.id,
        server_name: s.name,
        position: i,
        batch: batchOf[i]!,
        state: "pending",
        // Chosen now, so the deploy's answer names a deployment its server will have (issue 33).
        deployment_id: deploymentIds[i]!,
        updated_at: now,
      })),
    ),
  ];
}

export async function setServerState(
  db: Knex,
  rolloutId: string,
  serverId: string,
  change: Partial<
    Pick<RolloutServerRow, "state" | "deployment_id" | "rollback_deployment_id" | "failed_step" | "detail">
  >,
): Promise<void> {
  await db("rollout_servers")
    .where({ rollout_id: rolloutId, server_id: serverId })
    .update({ ...change, updated_at: Date.now() });
}

/** Ends the rollout (releasing its claim) with its audit event, in one transaction. */
export async function finishRollout(
  db: Knex,
  row: Pick<RolloutRow, "id" | "tenant_id" | "application_id">,
  status: Exclude<RolloutStatus, "running">,
  detail: string,
  payload: Record<string, unknown>,
): Promise<void> {
  await db.transaction(async (trx) => {
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: status === "halted" ? "rollout.halted" : "rollout.finished",
      payload: { rollout_id: row.id, application_id: row.application_id, status, detail, ...payload },
    });
    await trx("rollouts")
      .where({ id: row.id })
      .update({ status, detail, finished_at: Date.now(), active_application_id: null });
  });
}

/** A rollout as GET .../rollouts/{id} shows it, with its servers in order. */
export function presentRollout(r: RolloutRow, servers: RolloutServerRow[]) {
  return {
    rollout_id: r.id,
    application_id: r.application_id,
    operation_id: r.operation_id,
    kind: r.kind,
    status: r.status,
    detail: r.detail ?? null,
    strategy: JSON.parse(r.strategy) as Strategy,
    run_id: r.run_id ?? null,
    created_at: iso(Number(r.created_at)),
    finished_at: iso(r.finished_at === null ? null : Number(r.finished_at)),
    deadline_at: iso(Number(r.deadline_at)),
    servers: servers
      .sort((a, b) => Number(a.position) - Number(b.position))
      .map((s) => ({
        server_id: s.server_id,
        server_name: s.server_name,
        batch: Number(s.batch),
        state: s.state,
        deployment_id: s.deployment_id ?? null,
        rollback_deployment_id: s.rollback_deployment_id ?? null,
        failed_step: s.failed_step ?? null,
        detail: s.detail ?? null,
        updated_at: iso(Number(s.updated_at)),
      })),
  };
}

export async function getRollout(db: Knex, applicationId: string, rolloutId: string) {
  const r = await db("rollouts")
    .where({ id: rolloutId.toLowerCase(), application_id: applicationId })
    .first<RolloutRow | undefined>();
  if (!r) throw new RcError("RC_ERR_ROLLOUT_NOT_FOUND", `rollout '${rolloutId}' not found`);
  const servers = await db("rollout_servers").where({ rollout_id: r.id }).select<RolloutServerRow[]>();
  return presentRollout(r, servers);
}

/**
 * The rollout that named a deployment id no deployment has (yet): the server
 * waits for its batch or its drain, or the rollout never started it (skipped,
 * failed to start, ended early). Undefined when no rollout of the application named it.
 */
export async function plannedDeployment(db: Knex, applicationId: string, deploymentId: string) {
  return db("rollout_servers as s")
    .join("rollouts as r", "r.id", "s.rollout_id")
    .where({ "s.deployment_id": deploymentId, "r.application_id": applicationId })
    .first<
      { rollout_id: string; server_name: string; state: ServerState; status: RolloutStatus } | undefined
    >("r.id as rollout_id", "s.server_name", "s.state", "r.status");
}

/** The application's rollouts, newest first (at most `limit`), each with its servers. */
export async function listRollouts(db: Knex, applicationId: string, limit: number) {
  const rows = await db("rollouts")
    .where({ application_id: applicationId })
    .orderBy("created_at", "desc")
    .limit(limit)
    .select<RolloutRow[]>();
  if (rows.length === 0) return [];
  const servers = await db("rollout_servers")
    .whereIn(
      "rollout_id",
      rows.map((r) => r.id),
    )
    .select<RolloutServerRow[]>();
  return rows.map((r) =>
    presentRollout(
      r,
      servers.filter((s) => s.rollout_id === r.id),
    ),
  );
}

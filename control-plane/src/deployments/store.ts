// The deployments table and its steps and progress (migration 010). A
// deployment row is written in its operation's transaction (operations/store.ts
// `together`), so there is never one without the other; its final state is the
// operation's. What the agent reports lands here twice: JobProgress as it runs
// (deployment_progress, the live log; best effort) and the DeployReport with
// the result (deployment_steps and the commit/image columns, in the transaction
// that finishes the operation, so a finished deployment always has its steps).
import type { DeployProgress, DeployReport } from "@relayctl/proto";
import { DeployStepStatus } from "@relayctl/proto";
import type { Knex } from "knex";
import { isSqlite } from "../db/knex.js";
import type { ReleaseRecord } from "./releases.js";

export type Trigger = "api" | "dashboard" | "cli" | "webhook";

export interface DeploymentActor {
  /** automation_key, api_key, user, github_app */
  type: string;
  id: string | null;
  name: string | null;
}

export interface NewDeployment {
  id: string;
  tenantId: string;
  applicationId: string;
  serverId: string;
  trigger: Trigger;
  actor: DeploymentActor;
  commitRef: string;
  /** The release record (releases.ts): configuration, its hash, sealed env. */
  record?: ReleaseRecord;
  /** A rollback: the release it starts again, whose commit it runs. */
  rollbackOf?: {
    id: string;
    commit_sha: string | null;
    commit_message: string | null;
    commit_author: string | null;
  };
}

export interface DeploymentRow {
  seq: number;
  id: string;
  tenant_id: string;
  application_id: string;
  server_id: string;
  operation_id: string;
  trigger: Trigger;
  actor_type: string;
  actor_id: string | null;
  actor_name: string | null;
  commit_ref: string;
  commit_sha: string | null;
  commit_message: string | null;
  commit_author: string | null;
  image: string | null;
  container_name: string | null;
  host_port: number | null;
  upstream: string | null;
  proxy: string | null;
  failed_step: string | null;
  dispatched_at: number | null;
  created_at: number;
}

export const STEP_STATUS: Record<DeployStepStatus, string> = {
  [DeployStepStatus.DEPLOY_STEP_STATUS_UNSPECIFIED]: "running",
  [DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING]: "running",
  [DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED]: "succeeded",
  [DeployStepStatus.DEPLOY_STEP_STATUS_FAILED]: "failed",
  [DeployStepStatus.DEPLOY_STEP_STATUS_SKIPPED]: "skipped",
  [DeployStepStatus.UNRECOGNIZED]: "running",
};

const clip = (s: string, n: number) => (s.length > n ? s.slice(0, n) : s);

/** The row insert that rides in the operation's transaction. */
export function insertDeployment(trx: Knex.Transaction, d: NewDeployment, operationId: string, now: number) {
  return trx("deployments").insert({
    id: d.id,
    tenant_id: d.tenantId,
    application_id: d.applicationId,
    server_id: d.serverId,
    operation_id: operationId,
    trigger: d.trigger,
    actor_type: d.actor.type,
    actor_id: d.actor.id,
    actor_name: d.actor.name?.slice(0, 255) ?? null,
    commit_ref: d.commitRef,
    created_at: now,
    config: d.record?.config ?? null,
    env_sealed: d.record?.env_sealed ?? null,
    config_hash: d.record?.config_hash ?? null,
    rollback_of: d.rollbackOf?.id ?? null,
    // A rollback fetches nothing: its commit is its release's.
    commit_sha: d.rollbackOf?.commit_sha ?? null,
    commit_message: d.rollbackOf?.commit_message ?? null,
    commit_author: d.rollbackOf?.commit_author ?? null,
  });
}

/**
 * Commit facts known before the agent reports them (a push payload names the
 * commit, its message and author); the agent's report replaces them.
 */
export async function noteCommit(
  db: Knex,
  deploymentId: string,
  c: { sha: string; message: string | null; author: string | null },
): Promise<void> {
  await db("deployments")
    .where({ id: deploymentId })
    .whereNull("commit_sha")
    .update({
      commit_sha: clip(c.sha, 64),
      commit_message: c.message,
      commit_author: c.author ? clip(c.author, 512) : null,
    });
}

/** The operation went onto the agent's stream: no longer queued. */
export async function markDispatched(db: Knex, deploymentId: string): Promise<void> {
  await db("deployments")
    .where({ id: deploymentId })
    .whereNull("dispatched_at")
    .update({ dispatched_at: Date.now() });
}

/** Called inside the transaction that finishes a deploy operation. */
export async function recordReport(
  trx: Knex.Transaction,
  operationId: string,
  r: DeployReport,
): Promise<void> {
  const d = await trx("deployments")
    .where({ operation_id: operationId })
    .first<{ id: string } | undefined>("id");
  if (!d) return;
  await trx("deployments")
    .where({ id: d.id })
    .update({
      // No commit reported (an image build, a rollback): what the row knew stays.
      ...(r.commit?.sha
        ? {
            commit_sha: clip(r.commit.sha, 64),
            commit_message: r.commit.message || null,
            commit_author: r.commit.author ? clip(r.commit.author, 512) : null,
          }
        : {}),
      image: r.image ? clip(r.image, 1024) : null,
      image_id: r.imageId ? clip(r.imageId, 80) : null,
      container_name: r.containerName ? clip(r.containerName, 255) : null,
      host_port: r.hostPort || null,
      upstream: r.upstream ? clip(r.upstream, 512) : null,
      proxy: r.proxy ? clip(r.proxy, 16) : null,
      failed_step: r.failedStep ? clip(r.failedStep, 32) : null,
    });
  await trx("deployment_steps").where({ deployment_id: d.id }).delete();
  const steps = withQueueLines(
    r.steps,
    await trx("deployment_progress")
      .where({ deployment_id: d.id })
      .andWhere("seq", "<", 0)
      .orderBy("seq")
      .select<{ status: string; log: string; at: number }[]>("status", "log", "at"),
  );
  if (steps.length === 0) return;
  await trx("deployment_steps").insert(
    steps.map((s, position) => ({
      deployment_id: d.id,
      position,
      name: clip(s.name, 32),
      status: STEP_STATUS[s.status],
      started_at: Number(s.startedAtUnixMs) || null,
      ended_at: Number(s.endedAtUnixMs) || null,
      log: s.log,
    })),
  );
  // A step that ends after the report (retire, in the background on the agent) may have
  // had its end stored first: progress is not held for the result. A locking read sees
  // what committed after this transaction's snapshot.
  const q = trx("deployment_progress")
    .where({ deployment_id: d.id })
    .whereNot({ status: "running" })
    .orderBy("seq")
    .select<{ step: string; status: string; at: number }[]>("step", "status", "at");
  for (const p of await (isSqlite(trx) ? q : q.forShare()))
    await trx("deployment_steps")
      .where({ deployment_id: d.id, name: p.step, status: "running" })
      .update({ status: p.status, ended_at: p.at });
}

/**
 * The control plane's own progress rows of a deployment: its wait for an
 * earlier deployment of the application (service.ts), as a `queue` step before
 * anything the agent sends (the agent's seqs start at 1). recordReport keeps
 * them in the final steps.
 */
export const QUEUE_SEQ = { waiting: -2, ended: -1 } as const;

/** A line of the control plane's queue step (`<time> waiting for deployment <id> to finish`...). */
export async function recordQueueLine(
  db: Knex,
  deploymentId: string,
  seq: (typeof QUEUE_SEQ)[keyof typeof QUEUE_SEQ],
  status: "running" | "succeeded" | "failed",
  line: string,
): Promise<void> {
  const at = Date.now();
  await db("deployment_progress")
    .insert({
      deployment_id: deploymentId,
      seq,
      step: "queue",
      status,
      log: `${new Date(at).toISOString()} ${line}\n`,
      at,
    })
    .onConflict(["deployment_id", "seq"])
    .ignore();
}

/** The agent's steps with the control plane's queue lines first (joined to the agent's own queue step). */
function withQueueLines(steps: DeployReport["steps"], lines: { status: string; log: string; at: number }[]) {
  if (lines.length === 0) return steps;
  const log = lines.map((l) => l.log).join("");
  const started = Number(lines[0]!.at);
  const last = lines.at(-1)!;
  const agentQueue = steps.find((s) => s.name === "queue");
  if (agentQueue) {
    return steps.map((s) => (s === agentQueue ? { ...s, startedAtUnixMs: started, log: log + s.log } : s));
  }
  const status =
    last.status === "running"
      ? DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING
      : DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED;
  const queue = { name: "queue", status, startedAtUnixMs: started, endedAtUnixMs: Number(last.at), log };
  return [queue, ...steps];
}

/** At most n characters of whole lines (the agent sends whole lines: the cap cuts none). */
function wholeLines(s: string, n: number): string {
  if (s.length <= n) return s;
  return s.slice(0, s.lastIndexOf("\n", n - 1) + 1);
}

/** Live log text kept per deployment; past it, only step states are recorded. */
export const PROGRESS_LOG_CAP = 1024 * 1024;

/**
 * One progress message of a deploy operation of `serverId`'s agent. A step that
 * ends after the result (retire) also updates the final steps.
 */
export async function recordProgress(
  db: Knex,
  serverId: string,
  operationId: string,
  seq: number,
  p: DeployProgress,
): Promise<void> {
  const d = await db("deployments")
    .where({ operation_id: operationId, server_id: serverId })
    .first<{ id: string } | undefined>("id");
  if (!d) return;
  const status = STEP_STATUS[p.status];
  const at = Number(p.atUnixMs) || Date.now();
  const logged = await db("deployment_progress")
    .where({ deployment_id: d.id })
    .sum<{ n: number | string | null }>({ n: db.raw("length(log)") })
    .first();
  const room = PROGRESS_LOG_CAP - Number(logged?.n ?? 0);
  const log = room <= 0 ? "" : wholeLines(p.log, room);
  try {
    await db("deployment_progress").insert({
      deployment_id: d.id,
      seq,
      step: clip(p.step, 32),
      status,
      log,
      at,
    });
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    if (code === "ER_DUP_ENTRY" || code.startsWith("SQLITE_CONSTRAINT")) return; // sent twice
    throw err;
  }
  if (p.commit?.sha) {
    await db("deployments")
      .where({ id: d.id })
      .whereNull("commit_sha")
      .update({
        commit_sha: clip(p.commit.sha, 64),
        commit_message: p.commit.message || null,
        commit_author: p.commit.author ? clip(p.commit.author, 512) : null,
      });
  }
  if (status !== "running") {
    // A step that ends after the final report (retire): its stored step follows.
    await db("deployment_steps")
      .where({ deployment_id: d.id, name: clip(p.step, 32) })
      .whereNot({ status })
      .update({ status, ended_at: at });
  }
}

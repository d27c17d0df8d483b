// What callers read of deployments: the history of an application (newest
// first, cursor-paginated by seq), one deployment with its steps and their
// scrubbed logs, and its progress since a point (the live log). A deployment's
// state is its operation's, with `queued` while it waits for an earlier
// deployment of the application or for its agent.
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import { plannedDeployment } from "../fleets/store.js";
import { iso } from "../lib/time.js";
import { type DeploymentRow, QUEUE_SEQ } from "./store.js";

type Joined = DeploymentRow & {
  op_status: string;
  op_error: string | null;
  op_stderr: string | null;
  completed_at: number | null;
};

export type DeploymentStatus = "queued" | "running" | "completed" | "failed" | "timeout";

export interface StepView {
  name: string;
  status: string;
  started_at: string | null;
  ended_at: string | null;
  duration_ms: number | null;
  log: string;
}

export interface ProgressEvent {
  seq: number;
  step: string;
  status: string;
  log: string;
  at: string | null;
}

const COLUMNS = [
  "d.*",
  "o.status as op_status",
  "o.error as op_error",
  "o.stderr as op_stderr",
  "o.completed_at as completed_at",
];

function joined(db: Knex) {
  return db("deployments as d").join("operations as o", "o.id", "d.operation_id");
}

export function statusOf(r: Pick<Joined, "op_status" | "dispatched_at">): DeploymentStatus {
  if (r.op_status === "running") return r.dispatched_at === null ? "queued" : "running";
  return r.op_status as DeploymentStatus;
}

/**
 * `url`: where the deployment serves, the application's URL (hosts.ts) once it
 * completed and switched the proxy's route to its container (an upstream); null
 * before, after a failure, and when no proxy routes the application.
 */
function present(r: Joined, appUrl: string | null) {
  const status = statusOf(r);
  const finished = r.completed_at === null ? null : Number(r.completed_at);
  return {
    deployment_id: r.id,
    application_id: r.application_id,
    operation_id: r.operation_id,
    server_id: r.server_id,
    status,
    trigger: r.trigger,
    triggered_by: { type: r.actor_type, id: r.actor_id, name: r.actor_name },
    commit_ref: r.commit_ref,
    commit_sha: r.commit_sha,
    commit_message: r.commit_message,
    commit_author: r.commit_author,
    image: r.image,
    container_name: r.container_name,
    host_port: r.host_port === null ? null : Number(r.host_port),
    upstream: r.upstream,
    url: status === "completed" && r.upstream ? appUrl : null,
    failed_step: r.failed_step,
    error: status === "failed" || status === "timeout" ? r.op_stderr || r.op_error || null : null,
    created_at: iso(r.created_at),
    started_at: iso(r.dispatched_at),
    finished_at: iso(finished),
    duration_ms: finished === null ? null : finished - Number(r.created_at),
  };
}
export type DeploymentView = ReturnType<typeof present>;

export async function listDeployments(
  db: Knex,
  tenantId: string,
  applicationId: string,
  limit: number,
  cursor: number | undefined,
  appUrl: string | null = null,
): Promise<{ deployments: DeploymentView[]; next_cursor: string | null }> {
  const q = joined(db)
    .where({ "d.tenant_id": tenantId, "d.application_id": applicationId })
    .orderBy("d.seq", "desc")
    .limit(limit + 1);
  if (cursor !== undefined) q.andWhere("d.seq", "<", cursor);
  const rows = await q.select<Joined[]>(COLUMNS);
  const page = rows.slice(0, limit);
  const next = rows.length > limit ? String(page[page.length - 1]!.seq) : null;
  return { deployments: page.map((r) => present(r, appUrl)), next_cursor: next };
}

/**
 * The 404 of a deployment id no deployment has. A rollout answers its first
 * server's deployment id before that deployment exists (after a drain, docs/fleets.md):
 * the detail then says so and names the rollout (`rollout_id`) to follow.
 */
async function notFound(db: Knex, applicationId: string, id: string): Promise<RcError> {
  const planned = /^[0-9a-f-]{36}$/i.test(id)
    ? await plannedDeployment(db, applicationId, id.toLowerCase())
    : undefined;
  if (!planned) return new RcError("RC_ERR_DEPLOYMENT_NOT_FOUND", `deployment '${id}' not found`);
  const { rollout_id, server_name, state, status } = planned;
  const detail =
    status === "running" && state === "pending"
      ? `deployment '${id}' has not started yet: rollout '${rollout_id}' starts it on server '${server_name}' in its turn (after draining that server when the strategy has drain_seconds); follow the rollout`
      : `deployment '${id}' was never started: rollout '${rollout_id}' left server '${server_name}' ${state}`;
  return new RcError("RC_ERR_DEPLOYMENT_NOT_FOUND", detail, { extra: { rollout_id } });
}

async function findRow(db: Knex, tenantId: string, applicationId: string, id: string): Promise<Joined> {
  const row = /^[0-9a-f-]{36}$/i.test(id)
    ? await joined(db)
        .where({ "d.id": id.toLowerCase(), "d.tenant_id": tenantId, "d.application_id": applicationId })
        .first<Joined | undefined>(COLUMNS)
    : undefined;
  if (!row) throw await notFound(db, applicationId, id);
  return row;
}

export async function getDeployment(
  db: Knex,
  tenantId: string,
  applicationId: string,
  id: string,
  appUrl: string | null = null,
) {
  const row = await findRow(db, tenantId, applicationId, id);
  return { ...present(row, appUrl), steps: await stepsOf(db, row.id) };
}

/** The final report's steps once there is one; until then, folded from the progress. */
async function stepsOf(db: Knex, deploymentId: string): Promise<StepView[]> {
  const stored = await db("deployment_steps")
    .where({ deployment_id: deploymentId })
    .orderBy("position", "asc");
  if (stored.length > 0) {
    return stored.map((s) =>
      stepView(s.name, s.status, numOrNull(s.started_at), numOrNull(s.ended_at), s.log as string),
    );
  }
  const steps = new Map<string, { status: string; started: number; ended: number | null; log: string }>();
  for (const p of await progressSince(db, deploymentId, QUEUE_SEQ.waiting - 1)) {
    const at = Date.parse(p.at ?? "") || 0;
    const s = steps.get(p.step) ?? { status: p.status, started: at, ended: null, log: "" };
    s.status = p.status;
    s.log += p.log;
    if (p.status !== "running") s.ended = at;
    steps.set(p.step, s);
  }
  return [...steps].map(([name, s]) => stepView(name, s.status, s.started, s.ended, s.log));
}

const numOrNull = (v: unknown) => (v === null || v === undefined ? null : Number(v));

function stepView(name: string, status: string, started: number | null, ended: number | null, log: string) {
  return {
    name,
    status,
    started_at: iso(started),
    ended_at: iso(ended),
    duration_ms: started !== null && ended !== null ? ended - started : null,
    log,
  };
}

export async function progressSince(
  db: Knex,
  deploymentId: string,
  afterSeq: number,
): Promise<ProgressEvent[]> {
  const rows = await db("deployment_progress")
    .where({ deployment_id: deploymentId })
    .andWhere("seq", ">", afterSeq)
    .orderBy("seq", "asc")
    .limit(500);
  return rows.map((r) => ({
    seq: Number(r.seq),
    step: r.step as string,
    status: r.status as string,
    log: r.log as string,
    at: iso(numOrNull(r.at)),
  }));
}

/** For the live log: the deployment's id and whether it has finished. */
export async function deploymentState(
  db: Knex,
  tenantId: string,
  applicationId: string,
  id: string,
  appUrl: string | null = null,
) {
  const row = await findRow(db, tenantId, applicationId, id);
  return { id: row.id, finished: row.op_status !== "running", view: present(row, appUrl) };
}

/** Whether a finished deployment still has a step running (retire, after the result). */
export async function stepsRunning(db: Knex, deploymentId: string): Promise<boolean> {
  const row = await db("deployment_steps")
    .where({ deployment_id: deploymentId, status: "running" })
    .first<{ name: string } | undefined>("name");
  return row !== undefined;
}

// A push to a fleet application that comes while a rollout of the application
// runs waits for it (fleet_push_queue, migration 031), and is rolled out when it
// ends: the newest push is the one rolled out next, and a fleet is never split
// between two commits. One waiting push per application: a newer one takes its
// place, and the one it replaced is never rolled out (its guard row is given back,
// so a later delivery of that commit is judged afresh, stale or not).
//
// Who starts it: the instance whose rollout ends (RolloutService's onEnded), at
// once; and every instance's sweep (every SWEEP_MS), for a push whose rollout's
// driver stopped with its instance, or that was queued as the rollout ended. A
// start is claimed (claimed_until) so two instances never start the same push;
// the row goes once its rollout started. An instance that dies between the
// rollout's start and the row's removal leaves a claim that expires: the sweep
// then finds the application's rollout of that commit and only removes the row.
// The commit's status says all along that it waits, or why it never rolled out
// (queued-statuses.ts).
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { ApplicationRow } from "../applications/store.js";
import { RcError } from "../errors.js";
import {
  type PushDeployEnv,
  type PushedCommit,
  type StatusRow,
  rollOutOrQueue,
  started,
} from "./push-rules.js";
import {
  type NotRolledOut,
  statusNotRolledOut,
  statusQueued,
  statusRolledOut,
  statusSuperseded,
} from "./queued-statuses.js";

/** How often an api instance looks for waiting pushes nobody started. */
export const SWEEP_MS = 10_000;
/** How long a start's claim holds before another instance may take the push. */
const CLAIM_MS = 60_000;

/** What the push's rollout is started with, kept in the row (no secret: a push carries none). */
interface QueuedRequest {
  before: string | null;
  actor: PushedCommit["actor"];
  audit: Record<string, unknown>;
  commit: PushedCommit["commit"];
  status: StatusRow | null;
}

interface QueueRow {
  application_id: string;
  tenant_id: string;
  commit_sha: string;
  delivery_id: string;
  behind_rollout_id: string;
  request: string;
  queued_at: number | string;
}

/**
 * Puts the commit in the application's queue, behind `behind`; the commit it replaced, or null.
 * A rollout that ended before the row was written is caught by the sweep (or the next end).
 */
export async function queuePush(env: PushDeployEnv, c: PushedCommit, behind: string): Promise<string | null> {
  const request: QueuedRequest = {
    before: c.before,
    actor: c.actor,
    audit: c.audit,
    commit: c.commit,
    status: c.status ?? null,
  };
  const replaced = await env.db.transaction(async (trx) => {
    const prior = await trx("fleet_push_queue")
      .where({ application_id: c.app.id })
      .forUpdate()
      .first<{ commit_sha: string } | undefined>("commit_sha");
    await trx("fleet_push_queue").where({ application_id: c.app.id }).delete();
    await trx("fleet_push_queue").insert({
      application_id: c.app.id,
      tenant_id: c.app.tenant_id,
      commit_sha: c.sha,
      delivery_id: c.deliveryId,
      behind_rollout_id: behind,
      request: JSON.stringify(request),
      queued_at: Date.now(),
      claimed_until: null,
    });
    await statusQueued(trx, c, behind);
    if (!prior || prior.commit_sha === c.sha) return null;
    await statusSuperseded(trx, c.app.id, prior.commit_sha);
    // Never rolled out: a later delivery of it is judged again (stale, or deployed then).
    await trx("github_push_deployments")
      .where({ application_id: c.app.id, commit_sha: prior.commit_sha })
      .whereNull("deployment_id")
      .delete();
    return prior.commit_sha;
  });
  // The rollout may have ended while this was written: its end looked at an empty queue.
  if (env.rollouts && !(await rolloutRunning(env.db, c.app.id)))
    void startQueuedPush(env, c.app.id, env.log).catch(() => undefined);
  return replaced;
}

/** Whether a rollout of the application holds its claim with a running operation. */
async function rolloutRunning(db: Knex, applicationId: string): Promise<boolean> {
  const row = await db("rollouts as r")
    .leftJoin("operations as o", "o.id", "r.operation_id")
    .where({ "r.active_application_id": applicationId })
    .first<{ status: string | null } | undefined>("o.status");
  // An operation not recorded yet (null) is a rollout still being started.
  return row !== undefined && (row.status === null || row.status === "running");
}

/**
 * Starts the application's waiting push, if one waits and no other instance is starting it:
 * its rollout, with the application as it is now (its placement, its strategy). Queued again
 * when another rollout runs by then; dropped, with its guard row, when the application is
 * gone or no longer a fleet's.
 */
export async function startQueuedPush(
  env: PushDeployEnv,
  applicationId: string,
  log: Logger | undefined,
): Promise<void> {
  const { db } = env;
  const now = Date.now();
  const row = await db("fleet_push_queue")
    .where({ application_id: applicationId })
    .first<QueueRow | undefined>();
  if (!row) return;
  const taken = await db("fleet_push_queue")
    .where({ application_id: applicationId, commit_sha: row.commit_sha, queued_at: row.queued_at })
    .andWhere((q) => q.whereNull("claimed_until").orWhere("claimed_until", "<", now))
    .update({ claimed_until: now + CLAIM_MS });
  if (taken !== 1) return;
  const mine = { application_id: applicationId, commit_sha: row.commit_sha, queued_at: row.queued_at };
  const guard = { application_id: applicationId, commit_sha: row.commit_sha };
  const drop = async (why: string, status: NotRolledOut) => {
    await db("fleet_push_queue").where(mine).delete();
    await db("github_push_deployments").where(guard).whereNull("deployment_id").delete();
    await statusNotRolledOut(db, applicationId, row.commit_sha, status);
    log?.info({ application_id: applicationId, commit_sha: row.commit_sha }, `queued push dropped: ${why}`);
  };
  // A start that got as far as its rollout before its instance stopped: that rollout stands.
  const done = await db("github_push_deployments")
    .where(guard)
    .first<{ deployment_id: string | null } | undefined>("deployment_id");
  if (done?.deployment_id) {
    await db("fleet_push_queue").where(mine).delete();
    await statusRolledOut(db, applicationId, row.commit_sha);
    return;
  }
  const app = await db("applications").where({ id: applicationId }).first<ApplicationRow | undefined>();
  if (!app) return drop("the application was deleted", "application deleted");
  if (!app.placement) return drop("the application is no longer a fleet's (no placement)", "no placement");
  const req = JSON.parse(row.request) as QueuedRequest;
  const c: PushedCommit = {
    deliveryId: row.delivery_id,
    app,
    sha: row.commit_sha,
    before: req.before,
    actor: req.actor,
    audit: req.audit,
    commit: req.commit,
    ...(req.status ? { status: req.status } : {}),
  };
  try {
    // The row stays until the rollout started (a start that queues the commit again replaces it).
    const d = await rollOutOrQueue(env, c);
    if ("queued" in d) return;
    await started(env, c, d);
    await db("fleet_push_queue").where(mine).delete();
    await statusRolledOut(db, applicationId, row.commit_sha);
    log?.info(
      { application_id: applicationId, commit_sha: row.commit_sha, rollout_id: d.rolloutId },
      "queued push rolled out",
    );
  } catch (err) {
    await db("fleet_push_queue").where(mine).delete();
    await db("github_push_deployments").where(guard).whereNull("deployment_id").delete();
    await statusNotRolledOut(db, applicationId, row.commit_sha, "rollout not started");
    const why = err instanceof RcError ? err.detail : String(err);
    log?.warn(
      { err, application_id: applicationId, commit_sha: row.commit_sha },
      `queued push not rolled out: ${why}`,
    );
  }
}

/** Starts every waiting push whose application has no running rollout (and no live claim). */
export async function sweepQueuedPushes(env: PushDeployEnv, log: Logger | undefined): Promise<void> {
  const now = Date.now();
  const rows = await env
    .db("fleet_push_queue")
    .where((q) => q.whereNull("claimed_until").orWhere("claimed_until", "<", now))
    .select<{ application_id: string }[]>("application_id");
  for (const r of rows)
    if (!(await rolloutRunning(env.db, r.application_id))) await startQueuedPush(env, r.application_id, log);
}

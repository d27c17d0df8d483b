// The commit status of a push to a fleet application that waits for the running
// rollout (push-queue.ts): a person looking at the commit on GitHub, GitLab, Gitea
// or Forgejo sees `pending` ("waiting for the running rollout to end", linking to
// that rollout) from the moment it is queued, not nothing until its own rollout
// starts. A newer push that takes its place ends it as `error` ("superseded", as a
// plain deployment's is); a push that could not be rolled out at all says so. Once
// its rollout starts, the rollout's status row (github_commit_statuses,
// forge_commit_statuses) takes over and this one goes. Each forge's reporter sends
// these in its pass, before the deployments' and rollouts' statuses, so a queued
// `pending` is never told after its rollout's own state.
import type { Knex } from "knex";
import type { PushedCommit, StatusRow } from "./push-rules.js";

export const QUEUED_DESCRIPTION = "waiting for the running rollout to end";
export const SUPERSEDED_DESCRIPTION = "superseded by a newer push before it started";

/** Why a queued push was not rolled out, in fixed words (a public repository's statuses are public). */
export type NotRolledOut = "application deleted" | "no placement" | "rollout not started";
const NOT_ROLLED_OUT: Record<NotRolledOut, string> = {
  "application deleted": "not rolled out: the application was deleted",
  "no placement": "not rolled out: the application is no longer on a fleet",
  "rollout not started": "not rolled out: its rollout could not start; the link shows the application",
};

export interface QueuedStatus {
  application_id: string;
  commit_sha: string;
  status_table: StatusRow["table"];
  /** The status row's forge fields (StatusRow.row). */
  target: Record<string, string | number | null>;
  context: string;
  state: "pending" | "error";
  description: string;
  /** The dashboard page under /app/, or null. */
  link: string | null;
  reported_state: string | null;
  failures: number;
}

const TABLE = "queued_commit_statuses";

/** The pushed commit waits behind `behindRolloutId`: `pending`, told again if it waited before. */
export async function statusQueued(db: Knex, c: PushedCommit, behindRolloutId: string): Promise<void> {
  if (!c.status) return;
  await db(TABLE)
    .insert({
      application_id: c.app.id,
      commit_sha: c.sha,
      status_table: c.status.table,
      target: JSON.stringify(c.status.row),
      context: `relayctl/${c.app.name}`,
      state: "pending",
      description: QUEUED_DESCRIPTION,
      link: `applications/${c.app.id}/rollouts/${behindRolloutId}`,
      reported_state: null,
      failures: 0,
      created_at: Date.now(),
    })
    .onConflict(["application_id", "commit_sha"])
    .merge();
}

/** A newer push took the waiting commit's place: it ends as `error`, superseded. */
export function statusSuperseded(db: Knex, applicationId: string, sha: string): Promise<number> {
  return end(db, applicationId, sha, SUPERSEDED_DESCRIPTION, `applications/${applicationId}`);
}

/** The waiting commit was dropped without a rollout: `error`, saying why in fixed words. */
export function statusNotRolledOut(
  db: Knex,
  applicationId: string,
  sha: string,
  why: NotRolledOut,
): Promise<number> {
  const link = why === "application deleted" ? null : `applications/${applicationId}`;
  return end(db, applicationId, sha, NOT_ROLLED_OUT[why], link);
}

/** Its rollout started (or had started): the rollout's status row speaks for the commit now. */
export async function statusRolledOut(db: Knex, applicationId: string, sha: string): Promise<void> {
  await db(TABLE).where({ application_id: applicationId, commit_sha: sha }).delete();
}

function end(db: Knex, applicationId: string, sha: string, description: string, link: string | null) {
  return db(TABLE)
    .where({ application_id: applicationId, commit_sha: sha })
    .update({ state: "error", description, link, failures: 0 });
}

/** The queued statuses of one forge's table whose state it was not told yet, oldest first. */
export async function owedQueuedStatuses(
  db: Knex,
  table: StatusRow["table"],
  limit: number,
): Promise<QueuedStatus[]> {
  const rows = await db(TABLE)
    .where({ status_table: table })
    .andWhere((q) => q.whereNull("reported_state").orWhereRaw("reported_state <> state"))
    .orderBy("created_at", "asc")
    .limit(limit)
    .select<(Omit<QueuedStatus, "target"> & { target: string })[]>();
  return rows.map((r) => ({ ...r, target: JSON.parse(r.target), failures: Number(r.failures) }));
}

/**
 * The forge was told `s.state` (or gave up on it after its retries): a final state's row goes,
 * a `pending` one is kept until its rollout starts or it ends. Only the state read is marked: a
 * row that changed since the pass read it is told again.
 */
export async function queuedStatusTold(db: Knex, s: QueuedStatus): Promise<void> {
  const row = db(TABLE).where({ application_id: s.application_id, commit_sha: s.commit_sha, state: s.state });
  if (s.state === "error") await row.delete();
  else await row.update({ reported_state: s.state, failures: 0 });
}

/** A post that failed: its count of failures, kept for the forge's retry limit. */
export async function queuedStatusFailed(db: Knex, s: QueuedStatus): Promise<void> {
  await db(TABLE)
    .where({ application_id: s.application_id, commit_sha: s.commit_sha, state: s.state })
    .update({ failures: s.failures + 1 });
}

// What a push means for an application, whichever forge sent it (GitHub,
// GitLab, Gitea/Forgejo): the rules of docs/github-app.md "Which pushes deploy",
// written once. A forge's push handler reads its payload into a Push, asks
// skipReason for each linked application, and deploys the rest with
// deployPushedCommit (the shared per-commit guard, staleness and superseding).
import { posix } from "node:path";
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { ApplicationRow } from "../applications/store.js";
import type { DeployService } from "../deployments/service.js";
import { noteCommit } from "../deployments/store.js";
import { RcError } from "../errors.js";
import { placementOf, resolvePlacement } from "../fleets/placement.js";
import type { RolloutService } from "../fleets/rollouts.js";
import { type StrategyInput, compileStrategy } from "../fleets/strategy.js";
import type { Outcome, QueuedOutcome } from "../github/deliveries.js";
import { isDuplicate } from "../github/sql.js";
import { queuePush } from "./push-queue.js";

export const ZERO_SHA = /^0+$/;
export const matchesGlob = (name: string, glob: string) => posix.matchesGlob(name, glob);

/** A push, as every forge describes it. */
export interface Push {
  ref: string;
  /** A branch deleted (the forge's flag, or an all-zero `after`). */
  deletion: boolean;
}

/** What a push changed: `complete` false when not every file could be known. */
export type Changed = { files: string[]; complete: boolean };

/** The branch or tag a ref names. */
export function refParts(ref: string): { branch: string | null; tag: string | null } {
  return {
    branch: ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : null,
    tag: ref.startsWith("refs/tags/") ? ref.slice("refs/tags/".length) : null,
  };
}

/**
 * Why this push deploys nothing for the application, or null when it deploys;
 * the first reason wins: a deletion; a tag not matching deploy_tags; another
 * branch; auto_deploy off; watch_paths unmatched (branch pushes only).
 */
export async function skipReason(
  app: ApplicationRow,
  push: Push,
  changed: () => Promise<Changed>,
): Promise<string | null> {
  const { ref } = push;
  const { branch, tag } = refParts(ref);
  if (push.deletion) return `${ref} was deleted: a deletion deploys nothing`;
  if (tag !== null) {
    if (!app.deploy_tags) return `${ref} is a tag; the application deploys no tags (deploy_tags)`;
    if (!matchesGlob(tag, app.deploy_tags))
      return `tag '${tag}' does not match deploy_tags '${app.deploy_tags}'`;
  } else if (branch === null) return `${ref} is not a branch`;
  else if (branch !== app.deploy_branch)
    return `push to '${branch}'; the application deploys '${app.deploy_branch}'`;
  if (!Number(app.auto_deploy)) return "auto_deploy is off";
  // A tag names its commit on purpose: watch_paths filters branch pushes only.
  if (tag === null && app.watch_paths) return notWatched(await changed(), JSON.parse(app.watch_paths));
  return null;
}

/** Why a push deploys nothing for watch_paths, or null when it deploys (a file matched, or not all are known). */
export function notWatched(changed: Changed, watched: string[]): string | null {
  if (changed.files.some((f) => watched.some((g) => matchesGlob(f, g)))) return null;
  // Unknown files may match: deploying too often beats missing a change.
  if (!changed.complete) return null;
  return `no changed file matches watch_paths (${watched.join(", ")}): ${changed.files.length} file(s) changed`;
}

/** The changed files a payload's commits list (added, modified, removed). */
export function listedFiles(commits: unknown): string[][] {
  const list = (Array.isArray(commits) ? commits : []) as Record<string, unknown>[];
  return list.map((c) =>
    ["added", "modified", "removed"].flatMap((k) => (Array.isArray(c?.[k]) ? (c[k] as string[]) : [])),
  );
}

export interface PushedCommit {
  deliveryId: string;
  app: ApplicationRow;
  sha: string;
  /** The push's `before` (null for a new branch): a later delivery of that commit is stale. */
  before: string | null;
  actor: { type: string; id: string | null; name: string };
  audit: Record<string, unknown>;
  commit: { message: string | null; author: string | null };
  /**
   * The commit status row owed for the deployment, made once it exists (started). Data,
   * not a callback: a fleet application's queued push is started later, maybe by another
   * instance (push-queue.ts).
   */
  status?: StatusRow;
}

/** A commit status row (github/statuses.ts, forges/statuses.ts) but its deployment and rollout. */
export interface StatusRow {
  table: "github_commit_statuses" | "forge_commit_statuses";
  row: Record<string, string | number | null>;
}

/** What a pushed commit became: a deployment (a rollout's first), a queued rollout, or why nothing. */
export type PushDeployed =
  | { deploymentId: string; rolloutId?: string }
  | { queued: { behindRolloutId: string; superseded: string | null } }
  | { reason: string };

export interface PushDeployEnv {
  db: Knex;
  log?: Logger;
  deploys: DeployService;
  deployTimeoutSeconds: number;
  /** The process's rollouts (fleets/rollouts.ts): a push to a fleet application starts one. */
  rollouts?: RolloutService;
}

/**
 * Deploys a pushed commit once per application: a commit a newer push built on
 * is stale; the (application, commit) guard row lets one delivery through;
 * queued push deployments of the application are superseded. A fleet
 * application's commit is rolled out to its servers instead, or waits for the
 * application's running rollout (push-queue.ts).
 */
export async function deployPushedCommit(env: PushDeployEnv, c: PushedCommit): Promise<PushDeployed> {
  const { db } = env;
  const { app, sha } = c;
  // A fleet's deploy is a rollout, driven by the instance that starts it (fleets/rollouts.ts).
  if (app.placement && !env.rollouts)
    return {
      reason:
        "a fleet application (with a placement) is rolled out by an api instance; this process runs none",
    };
  // Forges do not promise delivery order: a push whose commit a newer push
  // already built on arrives stale, and deploying it would go backwards.
  const newer = await db("github_push_deployments")
    .where({ application_id: app.id, before_sha: sha })
    .first<{ commit_sha: string } | undefined>("commit_sha");
  if (newer)
    return {
      reason: `stale: a newer push (${newer.commit_sha.slice(0, 12)}) on top of this commit came first`,
    };
  if (!(await claimCommit(db, app.id, sha, c.before, c.deliveryId))) {
    const prior = await db("github_push_deployments")
      .where({ application_id: app.id, commit_sha: sha })
      .first<{ delivery_id: string; deployment_id: string | null }>("delivery_id", "deployment_id");
    return {
      reason: `commit ${sha.slice(0, 12)} was already deployed (delivery ${prior?.delivery_id}, deployment ${prior?.deployment_id ?? "starting"})`,
    };
  }
  try {
    const d = app.placement ? await rollOutOrQueue(env, c) : await deployOne(env, c);
    // Queued: the guard row stays (deployment_id null) while the commit waits its turn.
    if ("queued" in d) return d;
    return await started(env, c, d);
  } catch (err) {
    // Nothing was deployed: a later delivery of this commit may try again.
    await db("github_push_deployments").where({ application_id: app.id, commit_sha: sha }).delete();
    if (err instanceof RcError) return { reason: `cannot deploy: ${err.detail}` };
    throw err;
  }
}

/** A queued commit as a delivery's outcome says it. */
export function queuedEntry(
  applicationId: string,
  sha: string,
  q: { behindRolloutId: string; superseded: string | null },
): QueuedOutcome {
  const replaced = q.superseded ? `; it replaces ${q.superseded.slice(0, 12)}, which waited before it` : "";
  return {
    application_id: applicationId,
    commit_sha: sha,
    behind_rollout_id: q.behindRolloutId,
    superseded_commit_sha: q.superseded,
    reason: `a rollout of the application is running (${q.behindRolloutId}); this commit is rolled out when it ends, unless a newer push comes first${replaced}`,
  };
}

/** A push delivery's result and detail from what it did for each application. */
export function sumUp(outcome: Outcome, sha: string, what: string): void {
  const n = outcome.deployments!.length;
  const q = outcome.queued!.length;
  outcome.result = n > 0 ? "deployed" : q > 0 ? "queued" : "nothing";
  const parts = [
    ...(n > 0 ? [`${n} deployment(s) of ${sha.slice(0, 12)} started`] : []),
    ...(q > 0 ? [`${q} rollout(s) of ${sha.slice(0, 12)} queued behind a running one`] : []),
  ];
  outcome.detail =
    parts.length > 0
      ? parts.join("; ")
      : `nothing deployed for ${what}: ${outcome.skipped!.map((s) => s.reason).join("; ")}`;
  if (outcome.queued!.length === 0) outcome.queued = undefined;
}

/** A push's deployment (or rollout) started: the guard row, the commit and the status row name it. */
export async function started(
  env: Pick<PushDeployEnv, "db">,
  c: PushedCommit,
  d: { deploymentId: string; rolloutId: string | null },
): Promise<{ deploymentId: string; rolloutId?: string }> {
  const { db } = env;
  await db("github_push_deployments")
    .where({ application_id: c.app.id, commit_sha: c.sha })
    .update({ deployment_id: d.deploymentId });
  await noteCommit(db, d.deploymentId, { sha: c.sha, ...c.commit });
  if (c.status)
    await db(c.status.table).insert({
      ...c.status.row,
      deployment_id: d.deploymentId,
      rollout_id: d.rolloutId,
      reported_state: null,
      created_at: Date.now(),
    });
  return { deploymentId: d.deploymentId, ...(d.rolloutId ? { rolloutId: d.rolloutId } : {}) };
}

/** What a push's deployment is, on whichever server (the pushed commit, no env overrides, no key). */
function pushBase(env: PushDeployEnv, c: PushedCommit) {
  return {
    tenantId: c.app.tenant_id,
    commitRef: c.sha,
    envOverrides: {},
    timeoutSeconds: env.deployTimeoutSeconds,
    runId: null,
    trigger: "webhook" as const,
    actor: c.actor,
    keyId: null,
    audit: c.audit,
  };
}

/** An application on its one server: queued push deployments give way, then its deployment. */
async function deployOne(env: PushDeployEnv, c: PushedCommit) {
  const { app, sha } = c;
  const superseded = await supersedeQueued(env, app.id, sha);
  const server = await env
    .db("servers")
    .where({ id: app.server_id })
    .first<{ id: string; name: string }>("id", "name");
  const d = await env.deploys.request({
    ...pushBase(env, c),
    app,
    server: { id: server.id, name: server.name },
    audit: { ...c.audit, superseded_deployments: superseded },
  });
  return { deploymentId: d.deploymentId, rolloutId: null };
}

/**
 * A fleet application: a rollout over the servers its placement names now, with its own
 * strategy (as a deploy through the API without one). While a rollout of the application
 * runs, the commit waits for it (push-queue.ts): a push never splits a fleet between two
 * commits, and the newest push is the one rolled out next.
 */
export async function rollOutOrQueue(
  env: PushDeployEnv,
  c: PushedCommit,
): Promise<
  | { deploymentId: string; rolloutId: string }
  | { queued: { behindRolloutId: string; superseded: string | null } }
> {
  const { app } = c;
  const targets = await resolvePlacement(env.db, app.tenant_id, placementOf(app.placement)!);
  const appStrategy = app.rollout_strategy ? (JSON.parse(app.rollout_strategy) as StrategyInput) : null;
  try {
    const started = await env.rollouts!.start({
      app,
      targets,
      kind: "deploy",
      strategy: compileStrategy(appStrategy),
      base: pushBase(env, c),
    });
    return { deploymentId: started.deploymentId, rolloutId: started.rolloutId };
  } catch (err) {
    if (!(err instanceof RcError) || err.code !== "RC_ERR_ROLLOUT_RUNNING") throw err;
    const behind = String(err.extra.rollout_id ?? "");
    return { queued: { behindRolloutId: behind, superseded: await queuePush(env, c, behind) } };
  }
}

/** The (application, commit) guard: true for the one delivery that may deploy it. */
async function claimCommit(
  db: Knex,
  applicationId: string,
  sha: string,
  before: string | null,
  deliveryId: string,
): Promise<boolean> {
  try {
    await db("github_push_deployments").insert({
      application_id: applicationId,
      commit_sha: sha,
      before_sha: before,
      delivery_id: deliveryId,
      created_at: Date.now(),
    });
    return true;
  } catch (err) {
    if (isDuplicate(err)) return false;
    throw err;
  }
}

/** Push deployments of the application still waiting (not on the agent): a newer push replaces them. */
async function supersedeQueued(env: PushDeployEnv, applicationId: string, sha: string): Promise<string[]> {
  const queued = await env
    .db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .where({ "d.application_id": applicationId, "d.trigger": "webhook", "o.status": "running" })
    .whereNull("d.dispatched_at")
    .orderBy("d.seq", "asc")
    .select<{ id: string }[]>("d.id");
  const out: string[] = [];
  for (const q of queued)
    if (
      await env.deploys.cancelQueued(
        q.id,
        `superseded by a newer push (${sha.slice(0, 12)}) before it started`,
      )
    )
      out.push(q.id);
  return out;
}

/**
 * What a commit status row (`s`: github_commit_statuses, forge_commit_statuses) reports on, as
 * joins (`o` its operation, `a` its application, `d` its deployment when it exists): a
 * deployment's operation, or a rollout's. A rollout's first planned deployment may not exist
 * yet (with drain_seconds it starts later), or ever (the rollout halted first).
 */
export const STATUS_SOURCES = `LEFT JOIN rollouts AS ro ON ro.id = s.rollout_id
  LEFT JOIN deployments AS d ON d.id = s.deployment_id
  JOIN operations AS o ON o.id = COALESCE(ro.operation_id, d.operation_id)
  JOIN applications AS a ON a.id = COALESCE(ro.application_id, d.application_id)`;

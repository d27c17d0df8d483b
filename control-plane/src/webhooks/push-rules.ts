// What a push means for an application, whichever forge sent it (GitHub,
// GitLab, Gitea/Forgejo): the rules of docs/github-app.md "Which pushes deploy",
// written once. A forge's push handler reads its payload into a Push, asks
// skipReason for each linked application, and deploys the rest with
// deployPushedCommit (the shared per-commit guard, staleness and superseding).
import { posix } from "node:path";
import type { Knex } from "knex";
import type { ApplicationRow } from "../applications/store.js";
import type { DeployService } from "../deployments/service.js";
import { noteCommit } from "../deployments/store.js";
import { RcError } from "../errors.js";
import { isDuplicate } from "../github/sql.js";

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
  /** Recorded with the deployment (its commit status row), in the guard's reach. */
  recorded?: (deploymentId: string) => Promise<void>;
}

export interface PushDeployEnv {
  db: Knex;
  deploys: DeployService;
  deployTimeoutSeconds: number;
}

/**
 * Deploys a pushed commit once per application: a commit a newer push built on
 * is stale; the (application, commit) guard row lets one delivery through;
 * queued push deployments of the application are superseded.
 */
export async function deployPushedCommit(
  env: PushDeployEnv,
  c: PushedCommit,
): Promise<{ deploymentId: string } | { reason: string }> {
  const { db } = env;
  const { app, sha } = c;
  // A fleet's deploy is a rollout, with secrets held by the api instance that
  // drives it (fleets/rollouts.ts); deploying the home server alone would split the
  // fleet silently, so a push says why it did not deploy.
  if (app.placement)
    return {
      reason:
        "a fleet application (with a placement) is not deployed by pushes yet: deploy it through the API or the CLI (docs/fleets.md)",
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
  const superseded = await supersedeQueued(env, app.id, sha);
  try {
    const server = await db("servers")
      .where({ id: app.server_id })
      .first<{ id: string; name: string }>("id", "name");
    const d = await env.deploys.request({
      tenantId: app.tenant_id,
      app,
      server: { id: server.id, name: server.name },
      commitRef: sha,
      envOverrides: {},
      timeoutSeconds: env.deployTimeoutSeconds,
      runId: null,
      trigger: "webhook",
      actor: c.actor,
      keyId: null,
      audit: { ...c.audit, superseded_deployments: superseded },
    });
    await db("github_push_deployments")
      .where({ application_id: app.id, commit_sha: sha })
      .update({ deployment_id: d.deploymentId });
    await noteCommit(db, d.deploymentId, { sha, ...c.commit });
    await c.recorded?.(d.deploymentId);
    return { deploymentId: d.deploymentId };
  } catch (err) {
    // Nothing was deployed: a later delivery of this commit may try again.
    await db("github_push_deployments").where({ application_id: app.id, commit_sha: sha }).delete();
    if (err instanceof RcError) return { reason: `cannot deploy: ${err.detail}` };
    throw err;
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

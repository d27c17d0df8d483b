// A `push` delivery → deployments. For each application of the installation's
// tenant linked to the pushed repository, in this order, the first reason wins
// and is recorded in the delivery's outcome (a push never silently does nothing):
//   - the repository is no longer reachable, or the installation is suspended,
//     uninstalled or bound elsewhere → cannot deploy;
//   - a push to another branch, a branch deletion or a tag → nothing;
//   - auto_deploy off → nothing at all;
//   - this (application, commit) was deployed before → nothing (the guard row's
//     primary key, so two deliveries of one push, or two installations covering
//     one repository, make one deployment);
//   - otherwise the queued, not yet dispatched push deployments of the
//     application are superseded (failed with the reason) and the pushed commit
//     is deployed; DeployService keeps one deployment per application running.
// Only the installation's bound tenant's applications are considered: a
// delivery never picks a tenant by itself.
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import type { ApplicationRow } from "../applications/store.js";
import { noteCommit } from "../deployments/store.js";
import type { GitHubContext, Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";
import { cannotDeploy, reachableRepository } from "./installations.js";
import { isDuplicate } from "./sql.js";

const ZERO_SHA = /^0+$/;

export interface PushResult {
  outcome: Outcome;
  tenantId: string | null;
}

export async function pushEvent(ctx: GitHubContext, deliveryId: string, p: Payload): Promise<PushResult> {
  const { db } = ctx;
  // The App's own deliveries always name their installation; one without (a
  // repository or organisation webhook pointed at this URL with the App's secret)
  // has no tenant to act for.
  if (!Number.isSafeInteger(Number(p.installation?.id ?? Number.NaN)))
    return {
      tenantId: null,
      outcome: {
        result: "ignored",
        detail:
          "the push names no GitHub App installation (it did not come from the App's webhook): push ignored",
      },
    };
  const installationId = Number(p.installation.id);
  const repositoryId = Number(p.repository?.id);
  const inst = await db("github_installations")
    .where({ id: installationId })
    .first<{ tenant_id: string | null } | undefined>("tenant_id");
  const tenantId = inst?.tenant_id ?? null;
  if (!tenantId)
    return {
      tenantId,
      outcome: {
        result: "unbound",
        detail: `installation ${installationId} is not bound to a tenant yet (install through relayctl's install link): push ignored`,
      },
    };
  const apps = await db("applications")
    .where({ tenant_id: tenantId, github_repository_id: repositoryId })
    .orderBy("created_at", "asc")
    .select<ApplicationRow[]>("*");
  const repoName = String(p.repository?.full_name ?? repositoryId);
  if (apps.length === 0)
    return {
      tenantId,
      outcome: { result: "no_application", detail: `no application is linked to ${repoName}` },
    };

  const ref = String(p.ref ?? "");
  const after = String(p.after ?? "");
  const deletion = Boolean(p.deleted) || ZERO_SHA.test(after);
  const branch = ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : null;
  const repo = await reachableRepository(db, repositoryId);
  const outcome: Outcome = { result: "nothing", detail: "", deployments: [], skipped: [] };
  for (const app of apps) {
    const skip = (reason: string) => outcome.skipped!.push({ application_id: app.id, reason });
    const blocked = cannotDeploy(repo, tenantId);
    if (blocked) skip(`cannot deploy: ${blocked}`);
    else if (deletion) skip(`${ref} was deleted: a deletion deploys nothing`);
    else if (branch === null) skip(`${ref} is not a branch`);
    else if (branch !== app.deploy_branch)
      skip(`push to '${branch}'; the application deploys '${app.deploy_branch}'`);
    else if (!Number(app.auto_deploy)) skip("auto_deploy is off");
    else {
      const done = await deployCommit(ctx, deliveryId, app, repositoryId, installationId, after, p);
      if ("reason" in done) skip(done.reason);
      else
        outcome.deployments!.push({
          application_id: app.id,
          deployment_id: done.deploymentId,
          commit_sha: after,
        });
    }
  }
  const n = outcome.deployments!.length;
  outcome.result = n > 0 ? "deployed" : "nothing";
  outcome.detail =
    n > 0
      ? `${n} deployment(s) of ${after.slice(0, 12)} started`
      : `nothing deployed for ${ref} of ${repoName}: ${outcome.skipped!.map((s) => s.reason).join("; ")}`;
  return { tenantId, outcome };
}

async function deployCommit(
  ctx: GitHubContext,
  deliveryId: string,
  app: ApplicationRow,
  repositoryId: number,
  installationId: number,
  sha: string,
  p: Payload,
): Promise<{ deploymentId: string } | { reason: string }> {
  const { db } = ctx;
  // GitHub does not promise delivery order: a push whose commit a newer push
  // already built on arrives stale, and deploying it would go backwards.
  const newer = await db("github_push_deployments")
    .where({ application_id: app.id, before_sha: sha })
    .first<{ commit_sha: string } | undefined>("commit_sha");
  if (newer)
    return {
      reason: `stale: a newer push (${newer.commit_sha.slice(0, 12)}) on top of this commit came first`,
    };
  const before = typeof p.before === "string" && !ZERO_SHA.test(p.before) ? p.before : null;
  const claimed = await claimCommit(db, app.id, sha, before, deliveryId);
  if (!claimed) {
    const prior = await db("github_push_deployments")
      .where({ application_id: app.id, commit_sha: sha })
      .first<{ delivery_id: string; deployment_id: string | null }>("delivery_id", "deployment_id");
    return {
      reason: `commit ${sha.slice(0, 12)} was already deployed (delivery ${prior?.delivery_id}, deployment ${prior?.deployment_id ?? "starting"})`,
    };
  }
  const superseded = await supersedeQueued(ctx, app.id, sha);
  try {
    const server = await db("servers")
      .where({ id: app.server_id })
      .first<{ id: string; name: string }>("id", "name");
    const head = p.head_commit ?? {};
    const pusher = String(p.pusher?.name ?? p.sender?.login ?? "github");
    const d = await ctx.deploys.request({
      tenantId: app.tenant_id,
      app,
      server: { id: server.id, name: server.name },
      commitRef: sha,
      envOverrides: {},
      timeoutSeconds: ctx.deployTimeoutSeconds,
      runId: null,
      trigger: "webhook",
      actor: { type: "github_app", id: p.sender?.id ? String(p.sender.id) : null, name: pusher },
      keyId: null,
      audit: {
        github_delivery_id: deliveryId,
        github_repository: p.repository?.full_name ?? null,
        github_ref: p.ref,
        pusher,
        superseded_deployments: superseded,
      },
    });
    await db("github_push_deployments")
      .where({ application_id: app.id, commit_sha: sha })
      .update({ deployment_id: d.deploymentId });
    const author = head.author ? `${head.author.name ?? ""} <${head.author.email ?? ""}>`.trim() : null;
    await noteCommit(db, d.deploymentId, { sha, message: head.message ?? null, author });
    await db("github_commit_statuses").insert({
      deployment_id: d.deploymentId,
      installation_id: installationId,
      repository_id: repositoryId,
      commit_sha: sha,
      reported_state: null,
      created_at: Date.now(),
    });
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
async function supersedeQueued(ctx: GitHubContext, applicationId: string, sha: string): Promise<string[]> {
  const queued = await ctx
    .db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .where({ "d.application_id": applicationId, "d.trigger": "webhook", "o.status": "running" })
    .whereNull("d.dispatched_at")
    .orderBy("d.seq", "asc")
    .select<{ id: string }[]>("d.id");
  const out: string[] = [];
  for (const q of queued)
    if (
      await ctx.deploys.cancelQueued(
        q.id,
        `superseded by a newer push (${sha.slice(0, 12)}) before it started`,
      )
    )
      out.push(q.id);
  return out;
}

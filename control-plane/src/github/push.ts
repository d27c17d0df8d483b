// A `push` delivery → deployments. For each application of the installation's
// tenant linked to the pushed repository, in this order, the first reason wins
// and is recorded in the delivery's outcome (a push never silently does nothing):
//   - the repository is no longer reachable, or the installation is suspended,
//     uninstalled or bound elsewhere → cannot deploy;
//   - a push to another branch, a branch deletion, or a tag not matching the
//     application's deploy_tags pattern → nothing (a matching tag deploys the
//     commit it names);
//   - auto_deploy off → nothing at all;
//   - watch_paths set and no changed file of a branch push matches one → nothing
//     (the files are the payload's commits' lists, or the compare API's when
//     GitHub cut those short; a list that cannot be had deploys, saying so);
//   - this (application, commit) was deployed before → nothing (the guard row's
//     primary key, so two deliveries of one push, or two installations covering
//     one repository, make one deployment);
//   - otherwise the queued, not yet dispatched push deployments of the
//     application are superseded (failed with the reason) and the pushed commit
//     is deployed; DeployService keeps one deployment per application running.
// Only the installation's bound tenant's applications are considered: a
// delivery never picks a tenant by itself.
import { posix } from "node:path";
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import type { ApplicationRow } from "../applications/store.js";
import { noteCommit } from "../deployments/store.js";
import type { GitHubContext, Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";
import { cannotDeploy, reachableRepository } from "./installations.js";
import { isDuplicate } from "./sql.js";

const ZERO_SHA = /^0+$/;
const matchesGlob = (name: string, glob: string) => posix.matchesGlob(name, glob);

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
  const tag = ref.startsWith("refs/tags/") ? ref.slice("refs/tags/".length) : null;
  // An annotated tag's `after` is the tag object; head_commit is the commit it names.
  const commit = tag !== null && typeof p.head_commit?.id === "string" ? p.head_commit.id : after;
  const repo = await reachableRepository(db, repositoryId);
  const outcome: Outcome = { result: "nothing", detail: "", deployments: [], skipped: [] };
  const changed = lazyChangedFiles(ctx, installationId, repositoryId, p);
  // Why this push deploys nothing for the application, or null when it deploys.
  const whyNot = async (app: ApplicationRow): Promise<string | null> => {
    const blocked = cannotDeploy(repo, tenantId);
    if (blocked) return `cannot deploy: ${blocked}`;
    if (deletion) return `${ref} was deleted: a deletion deploys nothing`;
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
  };
  for (const app of apps) {
    const skip = (reason: string) => outcome.skipped!.push({ application_id: app.id, reason });
    const why = await whyNot(app);
    if (why) {
      skip(why);
      continue;
    }
    const done = await deployCommit(ctx, deliveryId, app, repositoryId, installationId, commit, p);
    if ("reason" in done) skip(done.reason);
    else
      outcome.deployments!.push({
        application_id: app.id,
        deployment_id: done.deploymentId,
        commit_sha: commit,
      });
  }
  const n = outcome.deployments!.length;
  outcome.result = n > 0 ? "deployed" : "nothing";
  outcome.detail =
    n > 0
      ? `${n} deployment(s) of ${commit.slice(0, 12)} started`
      : `nothing deployed for ${ref} of ${repoName}: ${outcome.skipped!.map((s) => s.reason).join("; ")}`;
  return { tenantId, outcome };
}

/** What a push changed: `complete` false when not every file could be known. */
type Changed = { files: string[]; complete: boolean };

/**
 * The files a push changed, asked for once whichever application needs them:
 * the payload's commits' added/modified/removed lists, unless GitHub cut them
 * short (more than 2048 commits, or 3000 files in a commit), when the compare
 * API answers. A new branch has no base to compare with.
 */
function lazyChangedFiles(ctx: GitHubContext, installationId: number, repositoryId: number, p: Payload) {
  let known: Promise<Changed> | undefined;
  const ask = async (): Promise<Changed> => {
    const commits = (Array.isArray(p.commits) ? p.commits : []) as Payload[];
    const lists = commits.map((c) =>
      ["added", "modified", "removed"].flatMap((k) => (Array.isArray(c[k]) ? (c[k] as string[]) : [])),
    );
    const cut = commits.length >= PAYLOAD_COMMIT_CAP || lists.some((l) => l.length >= PAYLOAD_FILE_CAP);
    if (!cut) return { files: lists.flat(), complete: true };
    const before = String(p.before ?? "");
    if (ZERO_SHA.test(before) || !before) return { files: lists.flat(), complete: false };
    try {
      return await ctx.app.changedFiles(
        installationId,
        repositoryId,
        String(p.repository?.full_name),
        before,
        String(p.after),
      );
    } catch (err) {
      ctx.log.warn({ err }, "the pushed commits could not be compared; deploying without watch_paths' check");
      return { files: lists.flat(), complete: false };
    }
  };
  return () => {
    known ??= ask();
    return known;
  };
}

/** GitHub's limits on a push payload: commits listed, and files listed per commit. */
const PAYLOAD_COMMIT_CAP = 2048;
const PAYLOAD_FILE_CAP = 3000;

/** Why a push deploys nothing for watch_paths, or null when it deploys (a file matched, or not all are known). */
function notWatched(changed: Changed, watched: string[]): string | null {
  if (changed.files.some((f) => watched.some((g) => matchesGlob(f, g)))) return null;
  // Unknown files may match: deploying too often beats missing a change.
  if (!changed.complete) return null;
  return `no changed file matches watch_paths (${watched.join(", ")}): ${changed.files.length} file(s) changed`;
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

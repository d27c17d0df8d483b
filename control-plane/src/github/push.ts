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
import type { ApplicationRow } from "../applications/store.js";
import {
  type Changed,
  type PushDeployed,
  ZERO_SHA,
  deployPushedCommit,
  listedFiles,
  queuedEntry,
  refParts,
  skipReason,
  sumUp,
} from "../webhooks/push-rules.js";
import type { GitHubContext, Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";
import { cannotDeploy, reachableRepository } from "./installations.js";

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
    // A preview shares its production application's repository and deploys from its pull request only.
    .where({ tenant_id: tenantId, github_repository_id: repositoryId, preview_of: null })
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
  const { tag } = refParts(ref);
  // An annotated tag's `after` is the tag object; head_commit is the commit it names.
  const commit = tag !== null && typeof p.head_commit?.id === "string" ? p.head_commit.id : after;
  const repo = await reachableRepository(db, repositoryId);
  const outcome: Outcome = { result: "nothing", detail: "", deployments: [], queued: [], skipped: [] };
  const changed = lazyChangedFiles(ctx, installationId, repositoryId, p);
  // Why this push deploys nothing for the application, or null when it deploys.
  const whyNot = async (app: ApplicationRow): Promise<string | null> => {
    const blocked = cannotDeploy(repo, tenantId);
    if (blocked) return `cannot deploy: ${blocked}`;
    return skipReason(app, { ref, deletion }, changed);
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
    else if ("queued" in done) outcome.queued!.push(queuedEntry(app.id, commit, done.queued));
    else
      outcome.deployments!.push({
        application_id: app.id,
        deployment_id: done.deploymentId,
        commit_sha: commit,
        ...(done.rolloutId ? { rollout_id: done.rolloutId } : {}),
      });
  }
  sumUp(outcome, commit, `${ref} of ${repoName}`);
  return { tenantId, outcome };
}

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
    const lists = listedFiles(commits);
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

async function deployCommit(
  ctx: GitHubContext,
  deliveryId: string,
  app: ApplicationRow,
  repositoryId: number,
  installationId: number,
  sha: string,
  p: Payload,
): Promise<PushDeployed> {
  const head = p.head_commit ?? {};
  const pusher = String(p.pusher?.name ?? p.sender?.login ?? "github");
  const author = head.author ? `${head.author.name ?? ""} <${head.author.email ?? ""}>`.trim() : null;
  return deployPushedCommit(ctx, {
    deliveryId,
    app,
    sha,
    before: typeof p.before === "string" && !ZERO_SHA.test(p.before) ? p.before : null,
    actor: { type: "github_app", id: p.sender?.id ? String(p.sender.id) : null, name: pusher },
    audit: {
      github_delivery_id: deliveryId,
      github_repository: p.repository?.full_name ?? null,
      github_ref: p.ref,
      pusher,
    },
    commit: { message: head.message ?? null, author },
    status: {
      table: "github_commit_statuses",
      row: { installation_id: installationId, repository_id: repositoryId, commit_sha: sha },
    },
  });
}

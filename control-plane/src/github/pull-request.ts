// A `pull_request` delivery → previews (previews/service.ts), for each
// production application of the installation's tenant linked to the
// repository: opened, reopened and synchronize open or update its preview,
// closed (merged or not) removes it; other actions do nothing. Each
// application's result is recorded in the delivery's outcome, as a push's is.
// A deployed preview gets a commit status on the head commit under
// `relayctl/<application>/preview` (statuses.ts) and one pull request comment
// with its URL, edited in place on later pushes (its id is kept on the preview),
// in the words of previews/comment.ts that every forge's comment shares.
// A fork's head is fetched from the base repository's pull ref with the base
// repository's token: a fork's own credentials are never asked for or used.
import { urlsOf } from "../applications/hosts.js";
import { type CommentState, previewCommentBody, removedCommentBody } from "../previews/comment.js";
import { type PreviewRow, previewByKey } from "../previews/store.js";
import { type PullRequestEvent, onPullRequest } from "../previews/service.js";
import type { GitHubContext, Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";
import { cannotDeploy, reachableRepository } from "./installations.js";

const ACTIONS: Record<string, PullRequestEvent["action"]> = {
  opened: "opened",
  reopened: "opened",
  synchronize: "updated",
  closed: "closed",
};

export async function pullRequestEvent(
  ctx: GitHubContext,
  deliveryId: string,
  action: string,
  p: Payload,
): Promise<{ outcome: Outcome; tenantId: string | null }> {
  const { db } = ctx;
  const installationId = Number(p.installation?.id ?? Number.NaN);
  if (!Number.isSafeInteger(installationId))
    return {
      tenantId: null,
      outcome: { result: "ignored", detail: "the pull request names no installation" },
    };
  const inst = await db("github_installations")
    .where({ id: installationId })
    .first<{ tenant_id: string | null } | undefined>("tenant_id");
  const tenantId = inst?.tenant_id ?? null;
  if (!tenantId)
    return {
      tenantId,
      outcome: { result: "unbound", detail: `installation ${installationId} is not bound to a tenant yet` },
    };
  const kind = ACTIONS[action];
  if (!kind)
    return {
      tenantId,
      outcome: { result: "ignored", detail: `pull request action '${action}' changes no preview` },
    };
  if (!ctx.previews)
    return { tenantId, outcome: { result: "ignored", detail: "previews are not available in this process" } };
  const repositoryId = Number(p.repository?.id);
  const apps = await db("applications")
    .where({ tenant_id: tenantId, github_repository_id: repositoryId, preview_of: null })
    .orderBy("created_at", "asc")
    .select<PreviewRow[]>("*");
  const repoName = String(p.repository?.full_name ?? repositoryId);
  if (apps.length === 0)
    return {
      tenantId,
      outcome: { result: "no_application", detail: `no application is linked to ${repoName}` },
    };
  const pr = p.pull_request ?? {};
  const number = Number(p.number ?? pr.number);
  const headRepo = pr.head?.repo?.id;
  // A head repository GitHub no longer shows (a deleted fork) counts as a fork.
  const fromFork = headRepo === undefined || headRepo === null || Number(headRepo) !== repositoryId;
  const blocked = cannotDeploy(await reachableRepository(db, repositoryId), tenantId);
  const outcome: Outcome = { result: "nothing", detail: "", deployments: [], skipped: [] };
  const removed: string[] = [];
  for (const app of apps) {
    const skip = (reason: string) => outcome.skipped!.push({ application_id: app.id, reason });
    if (blocked && kind !== "closed") {
      skip(`cannot deploy: ${blocked}`);
      continue;
    }
    const ev: PullRequestEvent = {
      tenantId,
      applicationId: app.id,
      source: "github",
      number,
      action: kind,
      headSha: String(pr.head?.sha ?? ""),
      headRef: String(pr.head?.ref ?? ""),
      fromFork,
      title: typeof pr.title === "string" ? pr.title : undefined,
      author: typeof pr.user?.login === "string" ? pr.user.login : undefined,
      url: typeof pr.html_url === "string" ? pr.html_url : undefined,
      fetchRef: `refs/pull/${number}/head`,
    };
    const actor = {
      actor: { type: "github_app", login: ev.author ?? null },
      github_delivery_id: deliveryId,
      github_repository: repoName,
    };
    // The comment's id goes with the preview's row: read it first to say it was removed.
    const before = kind === "closed" ? await previewByKey(db, app.id, `pr-${number}`) : undefined;
    const r = await onPullRequest(ctx.previews, ev, actor);
    if (r.result === "ignored") skip(r.detail);
    else if (r.result === "removed") {
      removed.push(r.detail);
      if (before?.preview_comment_id != null)
        await writeComment(
          ctx,
          installationId,
          repositoryId,
          repoName,
          number,
          Number(before.preview_comment_id),
          removedCommentBody(app.name, pr.merged === true),
        );
    } else {
      outcome.deployments!.push({
        application_id: app.id,
        deployment_id: r.deploymentId!,
        commit_sha: ev.headSha,
      });
      await db("github_commit_statuses").insert({
        deployment_id: r.deploymentId,
        installation_id: installationId,
        repository_id: repositoryId,
        commit_sha: ev.headSha,
        reported_state: null,
        created_at: Date.now(),
      });
      await commentPreview(
        ctx,
        installationId,
        repositoryId,
        repoName,
        number,
        r.previewId!,
        app.name,
        ev.headSha,
        {
          description: "relayctl is deploying this commit",
        },
      );
    }
  }
  const n = outcome.deployments!.length;
  outcome.result = n > 0 ? "deployed" : removed.length > 0 ? "removed" : "nothing";
  outcome.detail =
    n > 0 || removed.length > 0
      ? [
          ...(n > 0
            ? [`${n} preview deployment(s) of ${String(pr.head?.sha ?? "").slice(0, 12)} started`]
            : []),
          ...removed,
        ].join("; ")
      : `nothing done for pull request #${number} of ${repoName}: ${outcome.skipped!.map((s) => s.reason).join("; ")}`;
  return { tenantId, outcome };
}

/**
 * The preview's one comment on the pull request, written or edited in place
 * when its deployment starts and when it ends (statuses.ts: only while that
 * commit is still the preview's head; the delivery processor and the status
 * pass take turns in one loop, so a removal is not overwritten); a failure is
 * logged, not fatal.
 */
export async function commentPreview(
  ctx: GitHubContext,
  installationId: number,
  repositoryId: number,
  fullName: string,
  number: number,
  previewId: string,
  appName: string,
  sha: string,
  state: CommentState,
) {
  const row = await ctx.db("applications").where({ id: previewId }).first<PreviewRow | undefined>();
  if (!row || !ctx.previews || (row.preview_head_sha && row.preview_head_sha !== sha)) return;
  const { url } = await urlsOf(ctx.db, ctx.previews.config.appsUrl, row);
  const id = await writeComment(
    ctx,
    installationId,
    repositoryId,
    fullName,
    number,
    row.preview_comment_id === null ? null : Number(row.preview_comment_id),
    previewCommentBody(appName, url, sha, "pull request", state),
  );
  if (id !== null && id !== Number(row.preview_comment_id))
    await ctx.db("applications").where({ id: row.id }).update({ preview_comment_id: id });
}

/** Writes or edits the comment; its id, or null when GitHub could not be told (logged, not fatal). */
async function writeComment(
  ctx: GitHubContext,
  installationId: number,
  repositoryId: number,
  fullName: string,
  number: number,
  commentId: number | null,
  body: string,
): Promise<number | null> {
  try {
    return await ctx.app.upsertComment(installationId, repositoryId, fullName, number, commentId, body);
  } catch (err) {
    ctx.log.warn({ err, pull_request: number }, "pull request comment not written");
    return null;
  }
}

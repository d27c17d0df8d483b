// GitLab's `Merge Request Hook` and Gitea/Forgejo's `pull_request` → previews
// (previews/service.ts onPullRequest), for each application linked to the
// request's target project (previews themselves excluded). Mapped actions:
//   GitLab: open/reopen → opened; update with `oldrev` (new commits) → updated;
//           close/merge → closed; anything else (a title edit, an approval) → nothing;
//   Gitea:  opened/reopened → opened; synchronized → updated; closed → closed.
// The head is fetched from the base project's own ref (refs/merge-requests/N/head,
// refs/pull/N/head), which reaches a fork's commits too; a fork is a request whose
// source project differs from its target. A preview's deployment is reported on the
// head commit like a push's (statuses.ts), under the preview application's name,
// and gets one comment on the request with its URL, edited in place on later
// pushes and, on close, to say the preview was removed (comments.ts).
import type { Logger } from "pino";
import type { JobBus } from "../bus/job-bus.js";
import type { Config } from "../config.js";
import type { OperationService } from "../operations/service.js";
import { type PullRequestEvent, onPullRequest } from "../previews/service.js";
import { previewByKey } from "../previews/store.js";
import { commentPreview, commentRemoved } from "./comments.js";
import { forgeState } from "./statuses.js";
import type { ConnectionRow } from "./connections.js";
import type { ForgeContext, Payload } from "./context.js";
import type { ForgeDeliveryRow, Outcome } from "./deliveries.js";
import type { ReviewHandler } from "./processor.js";
import { linkedApplications, projectKeys } from "./push.js";

type Request = Omit<PullRequestEvent, "tenantId" | "applicationId">;

/** The request in previews' words, or why it does nothing. */
export function readRequest(c: ConnectionRow, p: Payload): Request | string {
  if (c.kind === "gitlab") {
    const a = p.object_attributes ?? {};
    const number = Number(a.iid);
    const act = String(a.action ?? "");
    const action =
      act === "open" || act === "reopen"
        ? "opened"
        : act === "update" && a.oldrev
          ? "updated"
          : act === "close" || act === "merge"
            ? "closed"
            : undefined;
    if (!action) return `merge request action '${act}' changes no code: nothing to do`;
    if (!Number.isSafeInteger(number) || number <= 0) return "the merge request has no iid";
    return {
      source: "gitlab",
      number,
      action,
      headSha: String(a.last_commit?.id ?? ""),
      headRef: String(a.source_branch ?? ""),
      fromFork: a.source_project_id !== undefined && a.source_project_id !== a.target_project_id,
      title: typeof a.title === "string" ? a.title : undefined,
      author: typeof p.user?.username === "string" ? p.user.username : undefined,
      url: typeof a.url === "string" ? a.url : undefined,
      fetchRef: `refs/merge-requests/${number}/head`,
    };
  }
  const pr = p.pull_request ?? {};
  const number = Number(p.number ?? pr.number);
  const act = String(p.action ?? "");
  const action =
    act === "opened" || act === "reopened"
      ? "opened"
      : act === "synchronized"
        ? "updated"
        : act === "closed"
          ? "closed"
          : undefined;
  if (!action) return `pull request action '${act}' changes no code: nothing to do`;
  if (!Number.isSafeInteger(number) || number <= 0) return "the pull request has no number";
  return {
    source: "gitea",
    number,
    action,
    headSha: String(pr.head?.sha ?? ""),
    headRef: String(pr.head?.ref ?? ""),
    fromFork: pr.head?.repo?.id !== undefined && pr.head?.repo?.id !== pr.base?.repo?.id,
    title: typeof pr.title === "string" ? pr.title : undefined,
    author: typeof pr.user?.login === "string" ? pr.user.login : undefined,
    url: typeof pr.html_url === "string" ? pr.html_url : undefined,
    fetchRef: `refs/pull/${number}/head`,
  };
}

/** Whether a closing request was merged (GitLab's `merge` action, Gitea's `merged`). */
const merged = (c: ConnectionRow, p: Payload) =>
  c.kind === "gitlab" ? p.object_attributes?.action === "merge" : p.pull_request?.merged === true;

/** What previews need beyond the forge's own context. */
export interface PreviewDeps {
  config: Config;
  bus: JobBus;
  ops: OperationService;
  log: Logger;
}

export const previewReviews =
  (deps: PreviewDeps): ReviewHandler =>
  async (ctx: ForgeContext, c: ConnectionRow, d: ForgeDeliveryRow, p: Payload): Promise<Outcome> => {
    const req = readRequest(c, p);
    if (typeof req === "string") return { result: "ignored", detail: req };
    const apps = await linkedApplications(ctx, c, projectKeys(c, p));
    if (apps.length === 0)
      return { result: "no_application", detail: "no application is linked to the project" };
    const outcome: Outcome = { result: "nothing", detail: "", deployments: [], skipped: [] };
    const details: string[] = [];
    for (const app of apps) {
      // The comment's id goes with the preview's row: read it before the close removes it.
      const before =
        req.action === "closed" ? await previewByKey(ctx.db, app.id, `pr-${req.number}`) : undefined;
      const r = await onPullRequest(
        { ...deps, db: ctx.db, deploys: ctx.deploys },
        { ...req, tenantId: c.tenant_id, applicationId: app.id },
        { forge: c.kind, forge_connection_id: c.id, forge_delivery_id: d.id, author: req.author ?? null },
      );
      details.push(r.detail);
      // The preview's deployment is reported on the request's head commit, as a push's is.
      if (r.deploymentId && req.headSha)
        await ctx.db("forge_commit_statuses").insert({
          deployment_id: r.deploymentId,
          connection_id: c.id,
          project: app.forge_project,
          commit_sha: req.headSha,
          reported_state: null,
          failures: 0,
          created_at: Date.now(),
        });
      if (r.deploymentId)
        outcome.deployments!.push({
          application_id: r.previewId ?? app.id,
          deployment_id: r.deploymentId,
          commit_sha: req.headSha,
        });
      else if (r.result === "ignored") outcome.skipped!.push({ application_id: app.id, reason: r.detail });
      if (r.deploymentId && r.previewId && app.forge_project)
        await commentPreview(ctx, c, app.forge_project, req.number, r.previewId, app.name, req.headSha, {
          description: forgeState(c.kind, {
            status: "running",
            stderr: null,
            dispatched_at: null,
            reported_state: null,
          }).description,
        });
      if (r.result === "removed") {
        outcome.result = "removed";
        if (before?.preview_comment_id != null && app.forge_project)
          await commentRemoved(
            ctx,
            c,
            app.forge_project,
            req.number,
            Number(before.preview_comment_id),
            app.name,
            merged(c, p),
          );
      }
    }
    if (outcome.deployments!.length > 0) outcome.result = "deployed";
    outcome.detail = details.join("; ");
    return outcome;
  };

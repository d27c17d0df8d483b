// A GitLab `Push Hook`/`Tag Push Hook` or a Gitea/Forgejo `push` → deployments,
// by the rules every forge shares (webhooks/push-rules.ts: deletion, branch,
// deploy_tags, auto_deploy, watch_paths, the per-commit guard, staleness,
// superseding). The applications considered are the connection's tenant's
// linked to this connection and this project (by its path, or for GitLab its
// numeric id too). Both forges cut a push's commit list short (GitLab lists
// 20); then the changed files are not all known, and watch_paths deploys.
import type { ApplicationRow } from "../applications/store.js";
import {
  type Changed,
  type Push,
  ZERO_SHA,
  deployPushedCommit,
  listedFiles,
  queuedEntry,
  refParts,
  skipReason,
  sumUp,
} from "../webhooks/push-rules.js";
import type { ConnectionRow } from "./connections.js";
import type { ForgeContext, Payload } from "./context.js";
import type { Outcome } from "./deliveries.js";

/** The pushed project's names: its path, and GitLab's numeric id. */
export function projectKeys(c: ConnectionRow, p: Payload): string[] {
  if (c.kind === "gitlab") {
    const path = p.project?.path_with_namespace ?? p.project?.pathWithNamespace;
    const id = p.project_id ?? p.project?.id;
    return [path, id].filter((v) => v !== undefined && v !== null).map((v) => String(v).toLowerCase());
  }
  const full = p.repository?.full_name;
  return full ? [String(full).toLowerCase()] : [];
}

/** The applications of the connection linked to the payload's project. */
export async function linkedApplications(ctx: ForgeContext, c: ConnectionRow, keys: string[]) {
  if (keys.length === 0) return [];
  return (
    ctx
      .db("applications")
      .where({ tenant_id: c.tenant_id, forge_connection_id: c.id })
      // A preview is a copy of its application: a push is its parent's, never its own.
      .whereNull("preview_of")
      .whereRaw(`LOWER(forge_project) IN (${keys.map(() => "?").join(", ")})`, keys)
      .orderBy("created_at", "asc")
      .select<(ApplicationRow & { forge_project: string })[]>("*")
  );
}

export async function forgePushEvent(
  ctx: ForgeContext,
  c: ConnectionRow,
  deliveryId: string,
  p: Payload,
): Promise<Outcome> {
  const keys = projectKeys(c, p);
  const apps = await linkedApplications(ctx, c, keys);
  const projectName = keys[0] ?? "the project";
  if (apps.length === 0)
    return {
      result: "no_application",
      detail: `no application is linked to ${projectName} through this connection`,
    };
  const ref = String(p.ref ?? "");
  const after = String(p.after ?? "");
  const push: Push = { ref, deletion: ZERO_SHA.test(after) || after === "" };
  const { tag } = refParts(ref);
  // An annotated tag's `after` is the tag object: GitLab names the commit in
  // checkout_sha, Gitea in head_commit.
  const named = c.kind === "gitlab" ? p.checkout_sha : p.head_commit?.id;
  const sha = tag !== null && typeof named === "string" && named ? named : after;
  const commits = (Array.isArray(p.commits) ? p.commits : []) as Payload[];
  const total = Number(c.kind === "gitlab" ? p.total_commits_count : p.total_commits);
  const changed = async (): Promise<Changed> => ({
    files: listedFiles(commits).flat(),
    complete: !(Number.isFinite(total) && total > commits.length),
  });
  const head = commits.find((x) => x?.id === sha) ?? p.head_commit ?? {};
  const pusher = String(
    c.kind === "gitlab"
      ? (p.user_username ?? p.user_name ?? "gitlab")
      : (p.pusher?.login ?? p.pusher?.username ?? p.sender?.login ?? c.kind),
  );
  const outcome: Outcome = { result: "nothing", detail: "", deployments: [], queued: [], skipped: [] };
  for (const app of apps) {
    const skip = (reason: string) => outcome.skipped!.push({ application_id: app.id, reason });
    const why = await skipReason(app, push, changed);
    if (why) {
      skip(why);
      continue;
    }
    const done = await deployPushedCommit(ctx, {
      deliveryId,
      app,
      sha,
      before: typeof p.before === "string" && !ZERO_SHA.test(p.before) ? p.before : null,
      actor: { type: `${c.kind}_webhook`, id: null, name: pusher },
      audit: {
        forge: c.kind,
        forge_connection_id: c.id,
        forge_delivery_id: deliveryId,
        forge_project: app.forge_project,
        forge_ref: ref,
        pusher,
      },
      commit: {
        message: typeof head.message === "string" ? head.message : null,
        author: head.author ? `${head.author.name ?? ""} <${head.author.email ?? ""}>`.trim() : null,
      },
      status: {
        table: "forge_commit_statuses",
        row: { connection_id: c.id, project: app.forge_project, commit_sha: sha, failures: 0 },
      },
    });
    if ("reason" in done) skip(done.reason);
    else if ("queued" in done) outcome.queued!.push(queuedEntry(app.id, sha, done.queued));
    else
      outcome.deployments!.push({
        application_id: app.id,
        deployment_id: done.deploymentId,
        commit_sha: sha,
        ...(done.rolloutId ? { rollout_id: done.rolloutId } : {}),
      });
  }
  sumUp(outcome, sha, `${ref} of ${projectName}`);
  return outcome;
}

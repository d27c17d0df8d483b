// Commit statuses owed to GitHub for push deployments, one context per
// application (`relayctl/<application name>`, so applications of one repository
// do not overwrite each other's):
// `pending` once the deployment exists, then `success` when it serves, or
// `failure` (`error` when a newer push superseded it). github_commit_statuses
// remembers the last state told, so a pass sends only what changed, and a
// control plane restarted in between catches up; a state is sent before it is
// recorded, so at worst GitHub hears one twice (statuses are append-only there).
// Its link (target_url) is the deployment's page in the web dashboard, which a
// person following it from GitHub can open (the API's URL needs an API key). A
// fleet application's push is a rollout: its status follows the rollout's
// operation and links to the rollout's page; one that waits for the running
// rollout is `pending` meanwhile (webhooks/queued-statuses.ts).
// Descriptions are fixed sentences: a deploy's error output can carry anything
// (paths, hosts, build output) and a public repository's statuses are public;
// the why is behind the link. A preview's final state also goes into its pull
// request's comment (pull-request.ts).
import { STATUS_SOURCES } from "../webhooks/push-rules.js";
import { owedQueuedStatuses, queuedStatusTold } from "../webhooks/queued-statuses.js";
import type { CommitState } from "./app-client.js";
import type { GitHubContext } from "./context.js";
import { commentPreview } from "./pull-request.js";

interface Owed {
  deployment_id: string;
  installation_id: number;
  repository_id: number;
  commit_sha: string;
  reported_state: string | null;
  full_name: string;
  tenant_id: string;
  application_id: string;
  application_name: string;
  /** The production application's name when the deployment is a preview's. */
  parent_name: string | null;
  preview_number: number | null;
  status: string;
  exit_code: number | null;
  stderr: string | null;
  /** A fleet application's push: its rollout, whose operation the state follows. */
  rollout_id: string | null;
}

function stateOf(o: Owed): { state: CommitState; description: string } {
  if (o.rollout_id) return rolloutState(o);
  if (o.status === "running") return { state: "pending", description: "relayctl is deploying this commit" };
  if (o.status === "completed") return { state: "success", description: "deployed and serving" };
  if ((o.stderr ?? "").startsWith("superseded"))
    return { state: "error", description: "superseded by a newer push before it started" };
  if (o.status === "timeout") return { state: "failure", description: "the deployment timed out" };
  return { state: "failure", description: "the deployment failed; the link shows why" };
}

/** A rollout's state, from its operation (fleets/rollouts.ts: completed with exit code 1 when some servers failed). */
export function rolloutState(o: Pick<Owed, "status" | "exit_code">): {
  state: CommitState;
  description: string;
} {
  if (o.status === "running")
    return { state: "pending", description: "relayctl is rolling this commit out to its servers" };
  if (o.status === "completed" && Number(o.exit_code) === 0)
    return { state: "success", description: "rolled out: deployed and serving on every server" };
  if (o.status === "completed")
    return { state: "failure", description: "rolled out, but not on every server; the link shows which" };
  if (o.status === "timeout") return { state: "failure", description: "the rollout timed out" };
  return { state: "failure", description: "the rollout halted; the link shows why" };
}

const FINAL = ["success", "failure", "error"];

/**
 * Tells GitHub the states of the fleet pushes that wait for a rollout, or ended without one
 * (webhooks/queued-statuses.ts). A repository no longer known here has nobody to tell.
 */
async function reportQueued(ctx: GitHubContext, limit: number): Promise<number> {
  const owed = await owedQueuedStatuses(ctx.db, "github_commit_statuses", limit);
  const names = new Map<number, string | undefined>();
  let sent = 0;
  for (const q of owed) {
    const repositoryId = Number(q.target.repository_id);
    if (!names.has(repositoryId))
      names.set(
        repositoryId,
        (
          await ctx
            .db("github_repositories")
            .where({ id: repositoryId })
            .first<{ full_name: string }>("full_name")
        )?.full_name,
      );
    const fullName = names.get(repositoryId);
    if (fullName === undefined) {
      await queuedStatusTold(ctx.db, q);
      continue;
    }
    try {
      await ctx.app.createStatus(Number(q.target.installation_id), repositoryId, fullName, q.commit_sha, {
        state: q.state,
        description: q.description,
        context: q.context,
        ...(ctx.publicUrl && q.link ? { target_url: `${ctx.publicUrl}/app/${q.link}` } : {}),
      });
    } catch (err) {
      ctx.log.warn(
        { err, application_id: q.application_id, commit_sha: q.commit_sha },
        "queued push's commit status not reported; retried on the next pass",
      );
      continue;
    }
    await queuedStatusTold(ctx.db, q);
    sent++;
  }
  return sent;
}

/** One pass: tells GitHub every state that changed since it was last told. Returns how many were sent. */
export async function reportStatuses(ctx: GitHubContext, limit = 50): Promise<number> {
  // The queued pushes' first: a queued `pending` is never told after its own rollout's state.
  const queued = await reportQueued(ctx, limit);
  const owed = await ctx
    .db("github_commit_statuses as s")
    .joinRaw(STATUS_SOURCES)
    .join("github_repositories as r", "r.id", "s.repository_id")
    .leftJoin("applications as p", "p.id", "a.preview_of")
    .where((q) => q.whereNull("s.reported_state").orWhereNotIn("s.reported_state", FINAL))
    .orderBy("s.created_at", "asc")
    .limit(limit)
    .select<Owed[]>(
      "s.deployment_id",
      "s.installation_id",
      "s.repository_id",
      "s.commit_sha",
      "s.reported_state",
      "r.full_name",
      "a.tenant_id",
      "a.id as application_id",
      "a.name as application_name",
      "p.name as parent_name",
      "a.preview_number",
      "o.status",
      "o.exit_code",
      "o.stderr",
      "s.rollout_id",
    );
  let sent = queued;
  for (const o of owed) {
    const next = stateOf(o);
    if (next.state === o.reported_state) continue;
    const page = o.rollout_id ? `rollouts/${o.rollout_id}` : `deployments/${o.deployment_id}`;
    const target = ctx.publicUrl
      ? `${ctx.publicUrl}/app/applications/${o.application_id}/${page}`
      : undefined;
    try {
      await ctx.app.createStatus(
        Number(o.installation_id),
        Number(o.repository_id),
        o.full_name,
        o.commit_sha,
        {
          ...next,
          // A preview's under its production application's name (previews: one per pull request).
          context: o.parent_name ? `relayctl/${o.parent_name}/preview` : `relayctl/${o.application_name}`,
          ...(target ? { target_url: target } : {}),
        },
      );
    } catch (err) {
      ctx.log.warn(
        { err, deployment_id: o.deployment_id },
        "commit status not reported; retried on the next pass",
      );
      continue;
    }
    await ctx
      .db("github_commit_statuses")
      .where({ deployment_id: o.deployment_id })
      .update({ reported_state: next.state });
    sent++;
    if (o.parent_name && o.preview_number !== null && FINAL.includes(next.state))
      await commentPreview(
        ctx,
        Number(o.installation_id),
        Number(o.repository_id),
        o.full_name,
        Number(o.preview_number),
        o.application_id,
        o.parent_name,
        o.commit_sha,
        { description: next.description, ...(target ? { link: target } : {}) },
      );
  }
  return sent;
}

// Commit statuses owed to GitLab/Gitea/Forgejo for push deployments, as
// github/statuses.ts does for GitHub: one context per application
// (`relayctl/<application name>`), fixed descriptions (a deploy's output never
// reaches a possibly public forge; the link shows why), the dashboard's page of
// the deployment as the link (a fleet application's rollout: the rollout's
// page). A pass sends each state that changed since the forge was last told; a
// post that fails is tried again on the next passes, and after MAX_FAILURES the
// state is given up (logged, without the token): the next state is still sent,
// and a status never fails a deploy. A preview's final
// state also goes into its request's comment (comments.ts).
import type { ForgeKind } from "./connections.js";
import { apiToken, type ConnectionRow } from "./connections.js";
import { commentPreview } from "./comments.js";
import type { ForgeContext } from "./context.js";
import { postStatus } from "./forge-api.js";
import { rolloutState } from "../github/statuses.js";
import { STATUS_SOURCES } from "../webhooks/push-rules.js";
import { owedQueuedStatuses, queuedStatusFailed, queuedStatusTold } from "../webhooks/queued-statuses.js";

const MAX_FAILURES = 3;

interface Owed {
  deployment_id: string;
  connection_id: string;
  project: string;
  commit_sha: string;
  reported_state: string | null;
  failures: number;
  application_id: string;
  application_name: string;
  status: string;
  exit_code: number | null;
  stderr: string | null;
  dispatched_at: number | null;
  /** A fleet application's push: its rollout, whose operation the state follows. */
  rollout_id: string | null;
  /** A preview's parent, request number and its parent's name (the comment's title). */
  preview_of: string | null;
  preview_number: number | null;
  parent_name: string | null;
}

/** The state in the forge's own words, and a fixed description. */
export function forgeState(
  kind: ForgeKind,
  o: Pick<Owed, "status" | "stderr" | "dispatched_at" | "reported_state"> &
    Partial<Pick<Owed, "exit_code" | "rollout_id">>,
) {
  const gitlab = kind === "gitlab";
  if (o.rollout_id) {
    // A rollout: as GitHub's (github/statuses.ts), in the forge's words; GitLab's `running` once
    // its first server's deployment is on that agent (`dispatched_at` is that deployment's).
    const r = rolloutState({ status: o.status, exit_code: o.exit_code ?? null });
    const running = gitlab && r.state === "pending" && o.dispatched_at !== null && o.reported_state !== null;
    const words: Record<string, string> = { failure: gitlab ? "failed" : "failure" };
    return { state: running ? "running" : (words[r.state] ?? r.state), description: r.description };
  }
  // GitLab knows `running`: told once the agent has the job, after `pending` (the commit's first word).
  if (o.status === "running")
    return o.dispatched_at !== null && gitlab && o.reported_state !== null
      ? { state: "running", description: "relayctl is deploying this commit" }
      : { state: "pending", description: "relayctl is deploying this commit" };
  if (o.status === "completed") return { state: "success", description: "deployed and serving" };
  if ((o.stderr ?? "").startsWith("superseded"))
    return {
      state: gitlab ? "canceled" : "error",
      description: "superseded by a newer push before it started",
    };
  const failed = gitlab ? "failed" : "failure";
  if (o.status === "timeout") return { state: failed, description: "the deployment timed out" };
  return { state: failed, description: "the deployment failed; the link shows why" };
}

const FINAL = ["success", "failed", "failure", "error", "canceled"];

/**
 * Tells each forge the states of the fleet pushes that wait for a rollout, or ended without one
 * (webhooks/queued-statuses.ts), with the same retries as the deployments' statuses.
 */
async function reportQueued(ctx: ForgeContext, masterKey: Buffer, limit: number): Promise<number> {
  const owed = await owedQueuedStatuses(ctx.db, "forge_commit_statuses", limit);
  const connections = new Map<string, ConnectionRow | undefined>();
  let sent = 0;
  for (const q of owed) {
    const id = String(q.target.connection_id);
    if (!connections.has(id)) connections.set(id, await ctx.db("forge_connections").where({ id }).first());
    const c = connections.get(id);
    if (!c) {
      await queuedStatusTold(ctx.db, q); // the connection removed: nobody to tell
      continue;
    }
    // GitLab's word for a pipeline that will not run is `canceled`; Gitea's and Forgejo's `error`.
    const state = q.state === "error" && c.kind === "gitlab" ? "canceled" : q.state;
    try {
      await postStatus(c.kind, c.base_url, apiToken(masterKey, c), String(q.target.project), q.commit_sha, {
        state,
        description: q.description,
        context: q.context,
        ...(ctx.publicUrl && q.link ? { target_url: `${ctx.publicUrl}/app/${q.link}` } : {}),
      });
    } catch (err) {
      const givenUp = q.failures + 1 >= MAX_FAILURES;
      ctx.log.warn(
        { err: (err as Error).message, application_id: q.application_id, state, forge: c.kind },
        givenUp
          ? "queued push's commit status not reported; given up for this state"
          : "queued push's commit status not reported; retried",
      );
      await (givenUp ? queuedStatusTold(ctx.db, q) : queuedStatusFailed(ctx.db, q));
      continue;
    }
    await queuedStatusTold(ctx.db, q);
    sent++;
  }
  return sent;
}

/** One pass: tells each forge every state that changed. Returns how many were sent. */
export async function reportForgeStatuses(ctx: ForgeContext, limit = 50): Promise<number> {
  if (!ctx.masterKey) return 0;
  // The queued pushes' first: a queued `pending` is never told after its own rollout's state.
  const queued = await reportQueued(ctx, ctx.masterKey, limit);
  const owed = await ctx
    .db("forge_commit_statuses as s")
    .joinRaw(STATUS_SOURCES)
    .leftJoin("applications as p", "p.id", "a.preview_of")
    .where((q) => q.whereNull("s.reported_state").orWhereNotIn("s.reported_state", FINAL))
    .orderBy("s.created_at", "asc")
    .limit(limit)
    .select<Owed[]>(
      "s.deployment_id",
      "s.connection_id",
      "s.project",
      "s.commit_sha",
      "s.reported_state",
      "s.failures",
      "a.id as application_id",
      "d.dispatched_at",
      "a.name as application_name",
      "a.preview_of",
      "a.preview_number",
      "p.name as parent_name",
      "o.status",
      "o.exit_code",
      "o.stderr",
      "s.rollout_id",
    );
  let sent = queued;
  const connections = new Map<string, ConnectionRow | undefined>();
  for (const o of owed) {
    if (!connections.has(o.connection_id))
      connections.set(
        o.connection_id,
        await ctx.db("forge_connections").where({ id: o.connection_id }).first(),
      );
    const c = connections.get(o.connection_id);
    if (!c) continue;
    const next = forgeState(c.kind, o);
    if (next.state === o.reported_state) continue;
    const page = o.rollout_id ? `rollouts/${o.rollout_id}` : `deployments/${o.deployment_id}`;
    const target = ctx.publicUrl
      ? `${ctx.publicUrl}/app/applications/${o.application_id}/${page}`
      : undefined;
    const row = ctx.db("forge_commit_statuses").where({ deployment_id: o.deployment_id });
    try {
      await postStatus(c.kind, c.base_url, apiToken(ctx.masterKey, c), o.project, o.commit_sha, {
        ...next,
        context: `relayctl/${o.application_name}`,
        ...(target ? { target_url: target } : {}),
      });
    } catch (err) {
      const failures = Number(o.failures) + 1;
      const givenUp = failures >= MAX_FAILURES;
      ctx.log.warn(
        { err: (err as Error).message, deployment_id: o.deployment_id, state: next.state, forge: c.kind },
        givenUp
          ? "commit status not reported; given up for this state"
          : "commit status not reported; retried",
      );
      await row.update(givenUp ? { reported_state: next.state, failures: 0 } : { failures });
      if (givenUp) await finalComment(ctx, c, o, next.state, next.description, target);
      continue;
    }
    await row.update({ reported_state: next.state, failures: 0 });
    await finalComment(ctx, c, o, next.state, next.description, target);
    sent++;
  }
  return sent;
}

/** A preview's deployment ended: its request's comment says how (never failing the pass). */
async function finalComment(
  ctx: ForgeContext,
  c: ConnectionRow,
  o: Owed,
  state: string,
  description: string,
  link: string | undefined,
) {
  if (!FINAL.includes(state) || !o.preview_of || o.preview_number === null || !o.parent_name) return;
  await commentPreview(
    ctx,
    c,
    o.project,
    Number(o.preview_number),
    o.application_id,
    o.parent_name,
    o.commit_sha,
    { description, ...(link ? { link } : {}) },
  );
}

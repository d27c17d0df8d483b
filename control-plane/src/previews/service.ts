// Preview environments (issue 32, docs/previews.md): a pull or merge request of
// a production application with previews enabled gets its own application
// row (previews/store.ts), deployed through the ordinary pipeline and removed
// through the ordinary cleanup (containers, images, route) when it closes.
// The forges' handlers (github/pull-request.ts, and the GitLab and Gitea ones)
// call onPullRequest; the API's routes (previews/routes.ts) call openPreview
// and removePreview. Rules, first match wins:
//   - previews off → ignored;
//   - a fork's request unless allow_forks → ignored, saying so; when allowed it
//     is built with no env values and no stored git credential;
//   - opening one past `max` stops the preview idle longest first (audited).
import type { FastifyBaseLogger } from "fastify";
import type { Knex } from "knex";
import type { Logger } from "pino";
import { requestCleanup } from "../applications/cleanup.js";
import { removeRoute } from "../applications/route-removal.js";
import { deleteApplication } from "../applications/store.js";
import type { JobBus } from "../bus/job-bus.js";
import type { Config } from "../config.js";
import type { DeployService } from "../deployments/service.js";
import type { DeploymentActor, Trigger } from "../deployments/store.js";
import { RcError } from "../errors.js";
import type { OperationService } from "../operations/service.js";
import { type PreviewRow, type PreviewSpec, listPreviewRows, previewByKey, upsertPreview } from "./store.js";
import { previewSettings } from "./settings.js";

/** What previews need from the process: the api's context (api routes), or the same built at boot for a forge. */
export interface PreviewContext {
  config: Config;
  db: Knex;
  bus: JobBus;
  ops: OperationService;
  deploys: DeployService;
  log: Logger;
}

export interface PullRequestEvent {
  tenantId: string;
  applicationId: string;
  source: "github" | "gitlab" | "gitea";
  number: number;
  action: "opened" | "updated" | "closed";
  headSha: string;
  headRef: string;
  fromFork: boolean;
  title?: string;
  author?: string;
  url?: string;
  /** how the agent fetches the head: the base repo's pull ref, e.g. refs/pull/12/head or refs/merge-requests/12/head */
  fetchRef?: string;
}

export interface PullRequestResult {
  result: "deployed" | "removed" | "ignored";
  detail: string;
  deploymentId?: string;
  /** The preview (its application id) when one exists after the event. */
  previewId?: string;
}

/** Deadline of a preview deployment when the caller gives none. */
const PREVIEW_TIMEOUT_SECONDS = 900;

export async function onPullRequest(
  ctx: PreviewContext,
  ev: PullRequestEvent,
  actor: Record<string, unknown>,
): Promise<PullRequestResult> {
  const parent = await ctx
    .db("applications")
    .where({ id: ev.applicationId, tenant_id: ev.tenantId })
    .first<PreviewRow | undefined>();
  if (!parent) return { result: "ignored", detail: `application ${ev.applicationId} no longer exists` };
  const key = `pr-${ev.number}`;
  const what = `${ev.source === "gitlab" ? "merge request !" : "pull request #"}${ev.number}`;
  const reason = `${what} ${ev.action}`;
  if (ev.action === "closed") {
    const child = await previewByKey(ctx.db, parent.id, key);
    if (!child) return { result: "ignored", detail: `${what} closed: it had no preview of ${parent.name}` };
    await removePreview(ctx, parent, child, { ...actor, reason });
    return {
      result: "removed",
      detail: `${what} closed: preview ${child.name} removed`,
      previewId: child.id,
    };
  }
  const settings = previewSettings(parent.previews);
  if (parent.preview_of) return { result: "ignored", detail: `${parent.name} is itself a preview` };
  if (!settings.enabled) return { result: "ignored", detail: `previews are off for ${parent.name}` };
  if (ev.fromFork && !settings.allow_forks)
    return {
      result: "ignored",
      detail: `${what} comes from a fork: not built, since ${parent.name} does not allow fork previews (previews.allow_forks)`,
    };
  // Per-commit idempotence: a redelivered event (or one of another hook) for a
  // head already deployed since the preview's last change deploys nothing again.
  const current = await previewByKey(ctx.db, parent.id, key);
  if (current && current.preview_head_sha === ev.headSha) {
    const since = await ctx
      .db("deployments")
      .where({ application_id: current.id })
      .andWhere("created_at", ">=", Number(current.preview_last_activity_at ?? 0))
      .first<{ id: string } | undefined>("id");
    if (since)
      return {
        result: "ignored",
        detail: `${what}: ${ev.headSha.slice(0, 12)} was already deployed to preview ${current.name} (deployment ${since.id})`,
        previewId: current.id,
      };
  }
  const d = await openPreview(
    ctx,
    parent,
    {
      key,
      number: ev.number,
      source: ev.source,
      headRef: ev.headRef,
      headSha: ev.headSha,
      fromFork: ev.fromFork,
      url: ev.url ?? null,
      image: null,
    },
    {
      // The base repository's pull ref reaches a fork's head too; a SHA is the fallback.
      commitRef: ev.fetchRef ?? ev.headSha,
      trigger: "webhook",
      deployActor: { type: `${ev.source}_app`, id: null, name: ev.author ?? ev.source },
      actor: { ...actor, reason },
    },
  );
  return {
    result: "deployed",
    detail: `${what}: preview ${d.row.name} deploying ${ev.headSha.slice(0, 12)}${ev.fromFork ? " (from a fork: no env values, no stored credential)" : ""}`,
    deploymentId: d.deploymentId,
    previewId: d.row.id,
  };
}

export interface OpenOptions {
  commitRef: string | undefined;
  trigger: Trigger;
  deployActor: DeploymentActor;
  /** Audit fields: who, and why. */
  actor: Record<string, unknown>;
  timeoutSeconds?: number;
}

/** Creates or updates the preview (cap first) and deploys it. */
export async function openPreview(
  ctx: PreviewContext,
  parent: PreviewRow,
  spec: PreviewSpec,
  o: OpenOptions,
) {
  const settings = previewSettings(parent.previews);
  if (parent.preview_of)
    throw new RcError("RC_ERR_PREVIEWS_DISABLED", `${parent.name} is a preview: previews have no previews`);
  if (!settings.enabled)
    throw new RcError("RC_ERR_PREVIEWS_DISABLED", `previews are not enabled for ${parent.name}`);
  const existing = await previewByKey(ctx.db, parent.id, spec.key);
  const moved = existing !== undefined && existing.server_id !== parent.server_id;
  // The application moved to another server since: the preview follows it, anew.
  if (moved)
    await removePreview(ctx, parent, existing, {
      ...o.actor,
      reason: "the application moved to another server",
    });
  if (!existing || moved) await makeRoom(ctx, parent, settings.max - 1, o.actor);
  const { row, created } = await upsertPreview(ctx.db, ctx.config.appsUrl, parent, spec, o.actor);
  const server = await ctx
    .db("servers")
    .where({ id: row.server_id })
    .first<{ id: string; name: string }>("id", "name");
  const d = await ctx.deploys.request({
    tenantId: row.tenant_id,
    app: row,
    server,
    commitRef: o.commitRef,
    envOverrides: {},
    timeoutSeconds: o.timeoutSeconds ?? PREVIEW_TIMEOUT_SECONDS,
    runId: null,
    trigger: o.trigger,
    actor: o.deployActor,
    keyId: null,
    audit: { ...o.actor, preview_of: parent.id, preview_key: spec.key },
    limits:
      settings.memory_mb || settings.cpus ? { memoryMb: settings.memory_mb, cpus: settings.cpus } : undefined,
  });
  return { row, created, deploymentId: d.deploymentId, operationId: d.operationId };
}

/** Stops the previews idle longest until at most `keep` remain (the cap), each audited with the reason. */
async function makeRoom(
  ctx: PreviewContext,
  parent: PreviewRow,
  keep: number,
  actor: Record<string, unknown>,
) {
  const rows = await listPreviewRows(ctx.db, parent.id);
  const idlest = [...rows].sort(
    (a, b) => Number(a.preview_last_activity_at ?? 0) - Number(b.preview_last_activity_at ?? 0),
  );
  const max = keep + 1;
  for (const r of idlest.slice(0, Math.max(0, rows.length - keep)))
    await removePreview(ctx, parent, r, {
      ...actor,
      reason: `the cap of ${max} previews was reached: ${r.name} was idle longest`,
    });
}

/**
 * Removes a preview: its row (and env, hostnames, containers state) at once,
 * its queued deployments cancelled, its route taken off the proxy and its
 * containers and images removed by the agent (cleanup.ts: pending until done,
 * so an agent away now does it at its next Hello). Audited as preview.removed.
 */
export async function removePreview(
  ctx: PreviewContext,
  parent: { id: string; name: string },
  child: PreviewRow,
  actor: Record<string, unknown>,
): Promise<void> {
  await deleteApplication(
    ctx.db,
    child.tenant_id,
    child.id,
    {
      ...actor,
      preview_of: parent.id,
      preview_key: child.preview_key,
    },
    "preview.removed",
  );
  const queued = await ctx
    .db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .where({ "d.application_id": child.id, "o.status": "running" })
    .whereNull("d.dispatched_at")
    .select<{ id: string }[]>("d.id");
  for (const d of queued) await ctx.deploys.cancelQueued(d.id, "the preview was removed");
  try {
    await removeRoute(ctx, {
      tenantId: child.tenant_id,
      serverId: child.server_id,
      applicationId: child.id,
      ip: "",
    });
  } catch (err) {
    ctx.log.warn(
      { err, application_id: child.id },
      "preview route removal not sent; the agent prunes it on its next sync",
    );
  }
  try {
    const server = await ctx.db("servers").where({ id: child.server_id }).first<{ name: string }>("name");
    await requestCleanup(
      ctx.ops,
      {
        tenantId: child.tenant_id,
        server: { id: child.server_id, name: server?.name ?? "" },
        applicationId: child.id,
        applicationName: child.name,
      },
      { reason: String(actor.reason ?? "preview removed"), preview_of: parent.id },
      0,
    );
  } catch (err) {
    ctx.log.warn(
      { err, application_id: child.id },
      "preview cleanup not sent; the agent gets it at its next Hello",
    );
  }
}

/** Every preview of an application (its deletion): removed one by one, never failing the deletion. */
export async function removePreviewsOf(
  ctx: Omit<PreviewContext, "log">,
  log: Logger | FastifyBaseLogger,
  parent: { id: string; name: string },
  actor: Record<string, unknown>,
): Promise<void> {
  for (const child of await listPreviewRows(ctx.db, parent.id))
    await removePreview({ ...ctx, log: log as Logger }, parent, child, actor);
}

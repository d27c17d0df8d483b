// /api/applications (management API): create, list, read, update and delete the
// tenant's applications; and GET /api/servers, the servers they can live on.
// Deleting an application (or moving it to another server) removes its route
// from the old server's proxy at once when the agent is connected; otherwise the
// agent prunes it on its next route sync (the job lists the applications that exist).
// A change of its hostnames (fqdns, or a name that gives a new default hostname)
// goes to its live container's route at once (live-route.ts): the PATCH answer
// carries `route` with the outcome. Every answer carries `url` and `urls` (hosts.ts).
import { type ReleaseRow, liveReleasesOf, presentRelease } from "../deployments/releases.js";
import { KEEP_RELEASES } from "../deployments/releases.js";
import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import { z } from "zod";
import { uuid as uuidSchema } from "../http/validation.js";
import { listServers } from "../servers/servers.js";
import type { ApiContext } from "../http/context.js";
import { auditActor } from "../auth/principal.js";
import { application, applicationList, applicationPatched, nothing, serverList } from "../http/answers.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { urlsOf, urlsOfMany } from "./hosts.js";
import { type RouteChange, applyRoute } from "./live-route.js";
import { removeRoute } from "./route-removal.js";
import { requestCleanup } from "./cleanup.js";
import { containerOf, containersOf } from "./container-state.js";
import { lastDeploymentsOf } from "./last-deployment.js";
import {
  type ApplicationRow,
  createApplication,
  deleteApplication,
  getApplication,
  listApplications,
  presentApplication,
  updateApplication,
} from "./store.js";
import {
  buildSchema,
  gitCredentialSchema,
  healthPathSchema,
  refSchema,
  tagPatternSchema,
  watchPathsSchema,
} from "./source.js";
import { CONTAINER_NAME_PATTERN, MAX_FQDNS } from "./validate.js";
import { fleetMembersOf, placementSchema } from "../fleets/placement.js";
import { strategySchema } from "../fleets/strategy.js";
import { removePreviewsOf } from "../previews/service.js";
import { previewSettingsSchema } from "../previews/settings.js";

// The route's schema (types, validation, docs); domain names get their RFC 1123
// check in the store (validate.ts), which the operator CLI goes through too.
const fields = {
  name: z.string().min(1).max(128),
  server_id: uuidSchema,
  linked_container_name: z.string().regex(new RegExp(CONTAINER_NAME_PATTERN)).max(255),
  container_port: z.int().min(1).max(65535),
  /** Sync entries must name container_port (external-deploy/sync.ts). */
  pin_port: z.boolean().optional(),
  fqdns: z.array(z.string().max(300)).max(MAX_FQDNS).optional(),
  // Deployments (source.ts checks what a schema cannot).
  git_repository: z.string().min(1).max(2048).nullable().optional(),
  deploy_branch: refSchema.optional(),
  git_credential: gitCredentialSchema.nullable().optional(),
  build: buildSchema.nullable().optional(),
  health_check_path: healthPathSchema.optional(),
  health_check_timeout_seconds: z.int().min(1).max(600).optional(),
  auto_deploy: z.boolean().optional(),
  /** GitHub pushes (github/push.ts): tag pushes matching this glob deploy too. */
  deploy_tags: tagPatternSchema.nullable().optional(),
  /** GitHub pushes: a branch push deploys only when a changed file matches one of these globs. */
  watch_paths: watchPathsSchema.nullable().optional(),
  /** Retention: how many newest releases keep their image on the server for a rollback. */
  keep_releases: z.int().min(KEEP_RELEASES.min).max(KEEP_RELEASES.max).optional(),
  /** Fleets (fleets/placement.ts, docs/fleets.md): the servers it runs on; null: server_id alone. */
  placement: placementSchema.optional(),
  /** Fleets: the default strategy of its rollouts (fleets/strategy.ts). */
  rollout_strategy: strategySchema.nullable().optional(),
  /** Preview environments of pull requests and the API (previews/settings.ts, docs/previews.md). */
  previews: previewSettingsSchema.optional(),
};
const createSchema = z.strictObject(fields);
const patchSchema = z
  .strictObject(fields)
  .partial()
  .refine((o) => Object.keys(o).length > 0, { error: "must name at least one field to change" });
const params = z.object({ id: z.string() });

/** The live release in an application's JSON: its image is kept by definition. */
const liveRelease = (r: ReleaseRow | undefined, urls: string[]) =>
  r ? presentRelease(r, urls, true, true) : null;

const actorOf = (req: FastifyRequest) => auditActor(req.principal, req.ip);

const serverNameOf = async (ctx: ApiContext, serverId: string) =>
  (await ctx.db("servers").where({ id: serverId }).first<{ name: string } | undefined>("name"))?.name;

/**
 * What one application's JSON adds to its stored fields: its server's name (pages
 * show a name, never a UUID), where it is served, its container, what is live and
 * its last deployment.
 */
async function stateOf(ctx: ApiContext, row: ApplicationRow) {
  const urls = await urlsOf(ctx.db, ctx.config.appsUrl, row);
  return {
    server_name: await serverNameOf(ctx, row.server_id),
    ...urls,
    ...(await containerOf(ctx.db, row.id)),
    live_release: liveRelease((await liveReleasesOf(ctx.db, [row])).get(row.id), urls.urls),
    last_deployment: (await lastDeploymentsOf(ctx.db, [row.id])).get(row.id) ?? null,
  };
}

/** Best effort: the deletion stands whatever the agent says; the outcome is logged. */
async function removeQuietly(ctx: ApiContext, log: FastifyBaseLogger, a: Parameters<typeof removeRoute>[1]) {
  try {
    const outcome = await removeRoute(ctx, a);
    log.info({ application_id: a.applicationId, outcome: outcome.state }, "route removal");
  } catch (err) {
    log.warn(
      { err, application_id: a.applicationId },
      "route removal not sent; the agent prunes it on its next sync",
    );
  }
}

/** How long DELETE waits for the agent's cleanup before answering (it goes on either way). */
const CLEANUP_WAIT_MS = 30_000;

/**
 * Best effort too: the cleanup is pending (cleanup.ts) until the agent reports it
 * done, and an agent that is away is asked again at its next Hello.
 */
async function cleanUpQuietly(
  ctx: ApiContext,
  log: FastifyBaseLogger,
  d: { tenantId: string; row: ApplicationRow; actor: ReturnType<typeof actorOf> },
  why: { reason: string; waitMs: number } = { reason: "application deleted", waitMs: CLEANUP_WAIT_MS },
) {
  try {
    const server = await ctx.db("servers").where({ id: d.row.server_id }).first<{ name: string }>("name");
    const target = {
      tenantId: d.tenantId,
      server: { id: d.row.server_id, name: server?.name ?? "" },
      applicationId: d.row.id,
      applicationName: d.row.name,
    };
    const audit = { reason: why.reason, requested_by: d.actor };
    const outcome = await requestCleanup(ctx.ops, target, audit, why.waitMs);
    log.info({ application_id: d.row.id, outcome: outcome.state }, "application cleanup");
  } catch (err) {
    log.warn(
      { err, application_id: d.row.id },
      "application cleanup not sent; the agent gets it at its next Hello",
    );
  }
}

/** Never fails the change it follows (already stored): a job that could not be sent is pending. */
async function applyQuietly(
  ctx: ApiContext,
  log: FastifyBaseLogger,
  app: ApplicationRow,
  ip: string,
): Promise<RouteChange> {
  try {
    const outcome = await applyRoute(ctx, app, ip);
    log.info({ application_id: app.id, outcome: outcome.status }, "route update");
    return outcome;
  } catch (err) {
    log.warn({ err, application_id: app.id }, "route update not sent");
    const detail = `the route could not be sent to the agent now (${(err as Error).message}): the application's next deployment applies it`;
    return { status: "pending", detail, operation_id: null, fqdns: [] };
  }
}

/** Did the change give the route other hostnames? (A move to another server is handled apart.) */
function hostsChanged(ctx: ApiContext, before: ApplicationRow, after: ApplicationRow): boolean {
  return before.fqdns !== after.fqdns || (ctx.config.appsUrl !== undefined && before.name !== after.name);
}

export const applicationsRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: "/api/servers",
    access: { credentials: MANAGEMENT },
    tag: "management",
    responses: { 200: serverList },
    handler: async (req) => ({
      servers: await listServers(ctx.db, ctx.bus, req.principal.tenantId),
    }),
  }),
  route({
    method: "POST",
    url: "/api/applications",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { body: createSchema },
    responses: { 201: application },
    handler: async (req, reply) => {
      const tenantId = req.principal.tenantId;
      const created = await createApplication(
        ctx.db,
        tenantId,
        req.body,
        actorOf(req),
        ctx.config.masterKey,
        ctx.config.appsUrl,
      );
      const row = await getApplication(ctx.db, tenantId, created.id);
      const urls = await urlsOf(ctx.db, ctx.config.appsUrl, row);
      const server_name = await serverNameOf(ctx, row.server_id);
      return reply.status(201).send({
        ...created,
        server_name,
        ...urls,
        container: null,
        live_release: null,
        last_deployment: null,
      });
    },
  }),
  route({
    method: "GET",
    url: "/api/applications",
    access: { credentials: MANAGEMENT },
    tag: "management",
    responses: { 200: applicationList },
    handler: async (req) => {
      const tenantId = req.principal.tenantId;
      const listed = await listApplications(ctx.db, tenantId);
      const rows = await ctx
        .db("applications")
        .where({ tenant_id: tenantId, preview_of: null })
        .select<ApplicationRow[]>();
      const urls = await urlsOfMany(ctx.db, ctx.config.appsUrl, rows);
      const containers = await containersOf(
        ctx.db,
        listed.map((a) => a.id),
      );
      const live = await liveReleasesOf(ctx.db, rows);
      const last = await lastDeploymentsOf(
        ctx.db,
        listed.map((a) => a.id),
      );
      return {
        applications: listed.map((a) => ({
          ...a,
          ...(urls.get(a.id) ?? { url: null, urls: [] }),
          container: containers.get(a.id) ?? null,
          live_release: liveRelease(live.get(a.id), urls.get(a.id)?.urls ?? []),
          last_deployment: last.get(a.id) ?? null,
        })),
      };
    },
  }),
  route({
    method: "GET",
    url: "/api/applications/:id",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { params },
    responses: { 200: application },
    handler: async (req) => {
      const row = await getApplication(ctx.db, req.principal.tenantId, req.params.id);
      return { ...presentApplication(row), ...(await stateOf(ctx, row)) };
    },
  }),
  route({
    method: "PATCH",
    url: "/api/applications/:id",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { params, body: patchSchema },
    responses: { 200: applicationPatched },
    handler: async (req) => {
      const tenantId = req.principal.tenantId;
      const { resource, before } = await updateApplication(
        ctx.db,
        tenantId,
        req.params.id,
        req.body,
        actorOf(req),
        ctx.config.masterKey,
        ctx.config.appsUrl,
      );
      const after = await getApplication(ctx.db, tenantId, before.id);
      if (resource.server_id !== before.server_id) {
        await removeQuietly(ctx, req.log, {
          tenantId,
          serverId: before.server_id,
          applicationId: before.id,
          ip: req.ip,
        });
        // Its containers and images on the old server go too (pending until done: store.ts).
        const reason = { reason: "application moved to another server", waitMs: 0 };
        await cleanUpQuietly(ctx, req.log, { tenantId, row: before, actor: actorOf(req) }, reason);
      }
      const urls = await stateOf(ctx, after);
      // On another server nothing runs yet: its first deployment there routes it.
      if (resource.server_id !== before.server_id || !hostsChanged(ctx, before, after))
        return { ...resource, ...urls };
      return { ...resource, ...urls, route: await applyQuietly(ctx, req.log, after, req.ip) };
    },
  }),
  route({
    method: "DELETE",
    url: "/api/applications/:id",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { params },
    responses: { 204: nothing },
    handler: async (req, reply) => {
      const tenantId = req.principal.tenantId;
      // Its previews go first, each with its containers, images and route (previews/service.ts).
      const parent = await getApplication(ctx.db, tenantId, req.params.id);
      await removePreviewsOf(ctx, req.log, parent, { ...actorOf(req), reason: "application deleted" });
      const row = await deleteApplication(ctx.db, tenantId, req.params.id, actorOf(req));
      // Deployments still waiting for their turn or their agent never start; one on its
      // agent ends before the cleanup there (the agent runs the cleanup in the app's turn).
      const queued = await ctx
        .db("deployments as d")
        .join("operations as o", "o.id", "d.operation_id")
        .where({ "d.application_id": row.id, "o.status": "running" })
        .whereNull("d.dispatched_at")
        .select<{ id: string }[]>("d.id");
      for (const d of queued) await ctx.deploys.cancelQueued(d.id, "the application was deleted");
      await removeQuietly(ctx, req.log, {
        tenantId,
        serverId: row.server_id,
        applicationId: row.id,
        ip: req.ip,
      });
      await cleanUpQuietly(ctx, req.log, { tenantId, row, actor: actorOf(req) });
      // A fleet's other servers: their route and their cleanup, not waited for (pending until done).
      for (const s of await fleetMembersOf(ctx.db, row)) {
        await removeQuietly(ctx, req.log, { tenantId, serverId: s.id, applicationId: row.id, ip: req.ip });
        const on = { tenantId, row: { ...row, server_id: s.id }, actor: actorOf(req) };
        await cleanUpQuietly(ctx, req.log, on, { reason: "application deleted", waitMs: 0 });
      }
      return reply.status(204).send();
    },
  }),
];

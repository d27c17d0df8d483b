// The dashboard API of deployments (management API, the caller's tenant):
//   GET    /api/tenant                                       the key's tenant
//   POST   /api/tenants/{t}/applications/{a}/deploy          202, returns at once
//   POST   /api/tenants/{t}/applications/{a}/rollback        202, a kept release again
//   GET    /api/tenants/{t}/applications/{a}/releases        newest (live) first
//   GET    /api/tenants/{t}/applications/{a}/deployments     history, newest first
//   GET    .../deployments/{d}                               one, with its steps
//   GET    .../deployments/{d}/log                           live log (SSE)
//   GET    /api/tenants/{t}/applications/{a}/env             names, never values
//   POST   /api/tenants/{t}/applications/{a}/env             add or update
//   DELETE /api/tenants/{t}/applications/{a}/env/{name}
// A tenant id other than the key's own, or another tenant's application, is 404.
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { envSchema, runIdSchema, uuidSchema } from "../http/schemas.js";
import { DEPLOY_TIMEOUT, deployTimeoutSchema } from "../http/operation-bodies.js";
import {
  deployStarted,
  deploymentPage,
  deploymentWithSteps,
  envNames,
  nothing,
  releaseList,
  tenant,
} from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { queryInt } from "../http/validation.js";
import { listEnv, setEnv, unsetEnv } from "../applications/env.js";
import { refSchema } from "../applications/source.js";
import { urlsOf } from "../applications/hosts.js";
import { type ApplicationRow, getApplication } from "../applications/store.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { LiveLogs } from "./live-log.js";
import { type RollbackTarget, listReleases, rollbackTarget } from "./releases.js";
import { getDeployment, listDeployments } from "./view.js";
import { fleetTargets, noStrategy, startRollout } from "../fleets/deploy.js";
import type { RolloutRequest } from "../fleets/rollouts.js";
import { type StrategyInput, strategySchema } from "../fleets/strategy.js";

const appParams = z.object({ tenant_id: z.string(), application_id: z.string() });
const deploymentParams = appParams.extend({ deployment_id: z.string() });
const envParams = appParams.extend({ name: z.string() });

const deployBody = z
  .strictObject({
    commit_ref: refSchema.optional(),
    env_overrides: envSchema.optional(),
    timeout_seconds: deployTimeoutSchema.optional(),
    run_id: runIdSchema.optional(),
    strategy: strategySchema.optional(),
  })
  .optional();
const rollbackBody = z
  .strictObject({
    release: uuidSchema
      .optional()
      .describe("the deployment id of the release to start again; default: the release before the live one"),
    timeout_seconds: deployTimeoutSchema.optional(),
    run_id: runIdSchema.optional(),
  })
  .optional();
const envBody = z.strictObject({ variables: envSchema });
const historyQuery = z.strictObject({
  limit: queryInt(1, 100).optional(),
  cursor: z
    .string()
    .regex(/^\d{1,18}$/, { error: "must be a next_cursor value" })
    .optional(),
});

const actorOf = (req: FastifyRequest) => auditActor(req.principal, req.ip);

/**
 * `closing`: aborted when the api closes, which ends the live logs being followed
 * (else closing would wait until every followed deployment finished).
 */
export const deploymentsRoutes = (ctx: ApiContext, closing: AbortSignal): RouteSpec[] => {
  const liveLogs = new LiveLogs(ctx.db, ctx.bus, ctx.config.liveLog);
  /** The application of the path, in the key's own tenant; 404 otherwise. */
  const scoped = async (req: FastifyRequest, p: { tenant_id: string; application_id: string }) => {
    const tenantId = req.principal.tenantId;
    if (p.tenant_id.toLowerCase() !== tenantId)
      throw new RcError("RC_ERR_TENANT_NOT_FOUND", `tenant '${p.tenant_id}' not found`);
    return getApplication(ctx.db, tenantId, p.application_id);
  };

  /** A deployment or rollback started from the dashboard API: who, how, and its audit. */
  const start = async (
    req: FastifyRequest,
    application: ApplicationRow,
    o: {
      commitRef?: string;
      envOverrides: Record<string, string>;
      timeoutSeconds?: number;
      runId?: string;
      rollback?: RollbackTarget;
      /** A rollback whose target is chosen after the fleet check (a fleet's is per server). */
      rollbackOf?: boolean;
      release?: string;
      strategy?: StrategyInput;
    },
  ) => {
    const p = req.principal;
    const base: RolloutRequest["base"] = {
      tenantId: application.tenant_id,
      commitRef: o.commitRef,
      envOverrides: o.envOverrides,
      timeoutSeconds: o.timeoutSeconds ?? DEPLOY_TIMEOUT.default,
      runId: o.runId ?? null,
      // The dashboard's pages (session cookie) or the dashboard API with a key; a
      // person's OAuth token is the relayctl CLI's.
      trigger: p.user && !p.session ? "cli" : "dashboard",
      actor: p.user
        ? { type: "user", id: p.user.id, name: p.user.email }
        : { type: "api_key", id: p.keyId, name: p.keyName },
      keyId: null,
      audit: { ...actorOf(req), run_id: o.runId ?? null },
    };
    // A fleet application (fleets/deploy.ts) rolls out over its servers.
    const fleet = await fleetTargets(ctx, p, application);
    if (fleet) {
      const kind = o.rollback || o.rollbackOf ? ("rollback" as const) : ("deploy" as const);
      return startRollout(ctx, application, fleet, { kind, base, strategy: o.strategy, release: o.release });
    }
    noStrategy(o.strategy);
    const server = await ctx.db("servers").where({ id: application.server_id }).first("id", "name");
    const rollback =
      o.rollback ?? (o.rollbackOf ? await rollbackTarget(ctx.db, application, o.release) : undefined);
    const d = await ctx.deploys.request({
      ...base,
      app: application,
      server: { id: server.id, name: server.name },
      rollback,
    });
    return { operation_id: d.operationId, status: "running" as const, deployment_id: d.deploymentId };
  };

  const base = "/api/tenants/:tenant_id/applications/:application_id";
  /** The application's URL, each deployment's `url` once it serves (view.ts). */
  const urlOf = async (a: ApplicationRow) => (await urlsOf(ctx.db, ctx.config.appsUrl, a)).url;

  return [
    route({
      method: "GET",
      url: "/api/tenant",
      access: { credentials: MANAGEMENT },
      tag: "management",
      responses: { 200: tenant },
      handler: async (req) => {
        const t = await ctx.db("tenants").where({ id: req.principal.tenantId }).first("id", "name");
        return { id: t.id as string, name: t.name as string };
      },
    }),
    route({
      method: "POST",
      url: `${base}/deploy`,
      access: { credentials: MANAGEMENT, role: "deployer" },
      tag: "management",
      schema: { params: appParams, body: deployBody },
      responses: { 202: deployStarted },
      handler: async (req, reply) => {
        const application = await scoped(req, req.params);
        const body = req.body ?? {};
        const d = await start(req, application, {
          commitRef: body.commit_ref,
          envOverrides: body.env_overrides ?? {},
          timeoutSeconds: body.timeout_seconds,
          runId: body.run_id,
          strategy: body.strategy,
        });
        return reply.status(202).send(d);
      },
    }),
    route({
      method: "POST",
      url: `${base}/rollback`,
      access: { credentials: MANAGEMENT, role: "deployer" },
      tag: "management",
      summary: "Roll the application back to a kept release (no build)",
      schema: { params: appParams, body: rollbackBody },
      responses: { 202: deployStarted },
      handler: async (req, reply) => {
        const application = await scoped(req, req.params);
        const body = req.body ?? {};
        const d = await start(req, application, {
          envOverrides: {},
          timeoutSeconds: body.timeout_seconds,
          runId: body.run_id,
          rollbackOf: true,
          release: body.release,
        });
        return reply.status(202).send(d);
      },
    }),
    route({
      method: "GET",
      url: `${base}/releases`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      summary: "The application's releases, newest (live) first, and which can be rolled back to",
      schema: { params: appParams },
      responses: { 200: releaseList },
      handler: async (req) => {
        const application = await scoped(req, req.params);
        const urls = (await urlsOf(ctx.db, ctx.config.appsUrl, application)).urls;
        return { releases: await listReleases(ctx.db, application, urls) };
      },
    }),
    route({
      method: "GET",
      url: `${base}/deployments`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams, querystring: historyQuery },
      responses: { 200: deploymentPage },
      handler: async (req) => {
        const application = await scoped(req, req.params);
        const cursor = req.query.cursor === undefined ? undefined : Number(req.query.cursor);
        return listDeployments(
          ctx.db,
          application.tenant_id,
          application.id,
          req.query.limit ?? 20,
          cursor,
          await urlOf(application),
        );
      },
    }),
    route({
      method: "GET",
      url: `${base}/deployments/:deployment_id`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: deploymentParams },
      responses: { 200: deploymentWithSteps },
      handler: async (req) => {
        const application = await scoped(req, req.params);
        return getDeployment(
          ctx.db,
          application.tenant_id,
          application.id,
          req.params.deployment_id,
          await urlOf(application),
        );
      },
    }),
    route({
      method: "GET",
      url: `${base}/deployments/:deployment_id/log`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: deploymentParams },
      handler: async (req, reply) => {
        const application = await scoped(req, req.params);
        await liveLogs.stream(
          reply,
          {
            tenantId: application.tenant_id,
            applicationId: application.id,
            deploymentId: req.params.deployment_id,
            appUrl: await urlOf(application),
          },
          { keyId: req.principal.keyId, tenantId: req.principal.tenantId },
          closing,
        );
      },
    }),
    route({
      method: "GET",
      url: `${base}/env`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams },
      responses: { 200: envNames },
      handler: async (req) => {
        const application = await scoped(req, req.params);
        return listEnv(ctx.db, application.id);
      },
    }),
    route({
      method: "POST",
      url: `${base}/env`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: appParams, body: envBody },
      responses: { 200: envNames },
      handler: async (req) => {
        const application = await scoped(req, req.params);
        return setEnv(ctx.db, ctx.config.masterKey, application, req.body.variables, actorOf(req));
      },
    }),
    route({
      method: "DELETE",
      url: `${base}/env/:name`,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: envParams },
      responses: { 204: nothing },
      handler: async (req, reply) => {
        const application = await scoped(req, req.params);
        await unsetEnv(ctx.db, application, req.params.name, actorOf(req));
        return reply.status(204).send();
      },
    }),
  ];
};

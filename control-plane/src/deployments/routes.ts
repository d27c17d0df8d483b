// The dashboard API of deployments (X-API-Key, full access to the key's tenant):
//   GET    /api/tenant                                       the key's tenant
//   POST   /api/tenants/{t}/applications/{a}/deploy          202, returns at once
//   GET    /api/tenants/{t}/applications/{a}/deployments     history, newest first
//   GET    .../deployments/{d}                               one, with its steps
//   GET    .../deployments/{d}/log                           live log (SSE)
//   GET    /api/tenants/{t}/applications/{a}/env             names, never values
//   POST   /api/tenants/{t}/applications/{a}/env             add or update
//   DELETE /api/tenants/{t}/applications/{a}/env/{name}
// A tenant id other than the key's own, or another tenant's application, is 404.
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { envSchema, runIdSchema } from "../http/schemas.js";
import { deployTimeoutSchema, DEPLOY_TIMEOUT } from "../api/automation/deploy.js";
import type { ApiContext } from "../http/context.js";
import { queryInt } from "../http/validation.js";
import { listEnv, setEnv, unsetEnv } from "../applications/env.js";
import { refSchema } from "../applications/source.js";
import { urlsOf } from "../applications/hosts.js";
import { type ApplicationRow, getApplication } from "../applications/store.js";
import { actorPayload } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { streamDeploymentLog } from "./live-log.js";
import { getDeployment, listDeployments } from "./view.js";

const appParams = z.object({ tenant_id: z.string(), application_id: z.string() });
const deploymentParams = appParams.extend({ deployment_id: z.string() });
const envParams = appParams.extend({ name: z.string() });

const deployBody = z
  .strictObject({
    commit_ref: refSchema.optional(),
    env_overrides: envSchema.optional(),
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

const actorOf = (req: FastifyRequest) => actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip);

export const deploymentsRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const closing = new AbortController();
    app.addHook("onClose", async () => closing.abort());

    /** The application of the path, in the key's own tenant; 404 otherwise. */
    const scoped = async (req: FastifyRequest, p: { tenant_id: string; application_id: string }) => {
      const tenantId = req.apiPrincipal.tenantId;
      if (p.tenant_id.toLowerCase() !== tenantId)
        throw new RcError("RC_ERR_TENANT_NOT_FOUND", `tenant '${p.tenant_id}' not found`);
      return getApplication(ctx.db, tenantId, p.application_id);
    };

    app.get("/tenant", async (req) => {
      const t = await ctx.db("tenants").where({ id: req.apiPrincipal.tenantId }).first("id", "name");
      return { id: t.id as string, name: t.name as string };
    });

    const base = "/tenants/:tenant_id/applications/:application_id";
    /** The application's URL, each deployment's `url` once it serves (view.ts). */
    const urlOf = async (a: ApplicationRow) => (await urlsOf(ctx.db, ctx.config.appsUrl, a)).url;

    app.post(`${base}/deploy`, { schema: { params: appParams, body: deployBody } }, async (req, reply) => {
      const application = await scoped(req, req.params);
      const server = await ctx.db("servers").where({ id: application.server_id }).first("id", "name");
      const body = req.body ?? {};
      const actor = actorOf(req);
      const d = await ctx.deploys.request({
        tenantId: application.tenant_id,
        app: application,
        server: { id: server.id, name: server.name },
        commitRef: body.commit_ref,
        envOverrides: body.env_overrides ?? {},
        timeoutSeconds: body.timeout_seconds ?? DEPLOY_TIMEOUT.default,
        runId: body.run_id ?? null,
        // The dashboard's pages (session cookie) or the dashboard API with a key; a
        // person's OAuth token is the relayctl CLI's.
        trigger: req.apiPrincipal.user && !req.apiPrincipal.session ? "cli" : "dashboard",
        actor: req.apiPrincipal.user
          ? { type: "user", id: req.apiPrincipal.user.id, name: req.apiPrincipal.user.email }
          : { type: "api_key", id: req.apiPrincipal.keyId, name: req.apiPrincipal.keyName },
        keyId: null,
        audit: { ...actor, run_id: body.run_id ?? null },
      });
      return reply
        .status(202)
        .send({ operation_id: d.operationId, status: "running", deployment_id: d.deploymentId });
    });

    app.get(
      `${base}/deployments`,
      { schema: { params: appParams, querystring: historyQuery } },
      async (req) => {
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
    );

    app.get(`${base}/deployments/:deployment_id`, { schema: { params: deploymentParams } }, async (req) => {
      const application = await scoped(req, req.params);
      return getDeployment(
        ctx.db,
        application.tenant_id,
        application.id,
        req.params.deployment_id,
        await urlOf(application),
      );
    });

    app.get(
      `${base}/deployments/:deployment_id/log`,
      { schema: { params: deploymentParams } },
      async (req, reply) => {
        const application = await scoped(req, req.params);
        await streamDeploymentLog(
          ctx.db,
          reply,
          {
            tenantId: application.tenant_id,
            applicationId: application.id,
            deploymentId: req.params.deployment_id,
            appUrl: await urlOf(application),
          },
          closing.signal,
        );
      },
    );

    app.get(`${base}/env`, { schema: { params: appParams } }, async (req) => {
      const application = await scoped(req, req.params);
      return listEnv(ctx.db, application.id);
    });

    app.post(`${base}/env`, { schema: { params: appParams, body: envBody } }, async (req) => {
      const application = await scoped(req, req.params);
      return setEnv(ctx.db, ctx.config.masterKey, application, req.body.variables, actorOf(req));
    });

    app.delete(`${base}/env/:name`, { schema: { params: envParams } }, async (req, reply) => {
      const application = await scoped(req, req.params);
      await unsetEnv(ctx.db, application, req.params.name, actorOf(req));
      return reply.status(204).send();
    });
  };

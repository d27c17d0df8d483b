// /api/applications (X-API-Key): create, list, read, update and delete the
// tenant's applications; and GET /api/servers, the servers they can live on.
// Deleting an application (or moving it to another server) removes its route
// from the old server's proxy at once when the agent is connected; otherwise the
// agent prunes it on its next route sync (the job lists the applications that exist).
import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { uuid as uuidSchema } from "../api/validation.js";
import { listServers } from "../api/automation/servers.js";
import type { ApiContext } from "../api/context.js";
import { actorPayload } from "../auth/security-audit.js";
import { removeRoute } from "./route-removal.js";
import {
  createApplication,
  deleteApplication,
  getApplication,
  listApplications,
  presentApplication,
  updateApplication,
} from "./store.js";
import { buildSchema, gitCredentialSchema, healthPathSchema, refSchema } from "./source.js";
import { CONTAINER_NAME_PATTERN, MAX_FQDNS } from "./validate.js";

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
};
const createSchema = z.strictObject(fields);
const patchSchema = z
  .strictObject(fields)
  .partial()
  .refine((o) => Object.keys(o).length > 0, { error: "must name at least one field to change" });
const params = z.object({ id: z.string() });

const actorOf = (req: FastifyRequest) => actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip);

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

export const applicationsRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get("/servers", async (req) => ({
      servers: await listServers(ctx.db, ctx.bus, req.apiPrincipal.tenantId),
    }));

    app.post("/applications", { schema: { body: createSchema } }, async (req, reply) => {
      const created = await createApplication(
        ctx.db,
        req.apiPrincipal.tenantId,
        req.body,
        actorOf(req),
        ctx.config.masterKey,
      );
      return reply.status(201).send(created);
    });

    app.get("/applications", async (req) => ({
      applications: await listApplications(ctx.db, req.apiPrincipal.tenantId),
    }));

    app.get("/applications/:id", { schema: { params } }, async (req) =>
      presentApplication(await getApplication(ctx.db, req.apiPrincipal.tenantId, req.params.id)),
    );

    app.patch("/applications/:id", { schema: { params, body: patchSchema } }, async (req) => {
      const tenantId = req.apiPrincipal.tenantId;
      const { resource, before } = await updateApplication(
        ctx.db,
        tenantId,
        req.params.id,
        req.body,
        actorOf(req),
        ctx.config.masterKey,
      );
      if (resource.server_id !== before.server_id) {
        await removeQuietly(ctx, req.log, {
          tenantId,
          serverId: before.server_id,
          applicationId: before.id,
          ip: req.ip,
        });
      }
      return resource;
    });

    app.delete("/applications/:id", { schema: { params } }, async (req, reply) => {
      const tenantId = req.apiPrincipal.tenantId;
      const row = await deleteApplication(ctx.db, tenantId, req.params.id, actorOf(req));
      await removeQuietly(ctx, req.log, {
        tenantId,
        serverId: row.server_id,
        applicationId: row.id,
        ip: req.ip,
      });
      return reply.status(204).send();
    });
  };

// /api/applications (X-API-Key): create, list, read, update and delete the
// tenant's applications; and GET /api/servers, the servers they can live on.
// Deleting an application (or moving it to another server) removes its route
// from the old server's proxy at once when the agent is connected; otherwise the
// agent prunes it on its next route sync (the job lists the applications that exist).
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ApiContext } from "../api/context.js";
import { actorPayload } from "../auth/security-audit.js";
import { removeRoute } from "./route-removal.js";
import {
  type ApplicationInput,
  createApplication,
  deleteApplication,
  getApplication,
  listApplications,
  presentApplication,
  updateApplication,
} from "./store.js";
import { applicationFields } from "./validate.js";

const createSchema = {
  type: "object",
  required: ["name", "server_id", "linked_container_name", "container_port"],
  additionalProperties: false,
  properties: applicationFields,
} as const;
const patchSchema = {
  type: "object",
  minProperties: 1,
  additionalProperties: false,
  properties: applicationFields,
} as const;

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
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get("/servers", async (req) => {
      const rows = await ctx
        .db("servers")
        .where({ tenant_id: req.apiPrincipal.tenantId })
        .orderBy("created_at", "asc")
        .select("id", "name", "hostname", "agent_version", "last_seen_at");
      return {
        servers: rows.map((r) => ({
          id: r.id,
          name: r.name,
          hostname: r.hostname,
          agent_version: r.agent_version,
          last_seen_at: r.last_seen_at === null ? null : new Date(Number(r.last_seen_at)).toISOString(),
        })),
      };
    });

    app.post<{ Body: ApplicationInput }>(
      "/applications",
      { schema: { body: createSchema } },
      async (req, reply) => {
        const created = await createApplication(ctx.db, req.apiPrincipal.tenantId, req.body, actorOf(req));
        return reply.status(201).send(created);
      },
    );

    app.get("/applications", async (req) => ({
      applications: await listApplications(ctx.db, req.apiPrincipal.tenantId),
    }));

    app.get<{ Params: { id: string } }>("/applications/:id", async (req) =>
      presentApplication(await getApplication(ctx.db, req.apiPrincipal.tenantId, req.params.id)),
    );

    app.patch<{ Params: { id: string }; Body: ApplicationInput }>(
      "/applications/:id",
      { schema: { body: patchSchema } },
      async (req) => {
        const tenantId = req.apiPrincipal.tenantId;
        const { resource, before } = await updateApplication(
          ctx.db,
          tenantId,
          req.params.id,
          req.body,
          actorOf(req),
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
      },
    );

    app.delete<{ Params: { id: string } }>("/applications/:id", async (req, reply) => {
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

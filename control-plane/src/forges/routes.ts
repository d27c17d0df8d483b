// The forge endpoints of the management API (the caller's tenant):
//   POST   /api/forges                  {kind, name, base_url, api_token}: 201 with the webhook secret, shown once
//   GET    /api/forges                  the tenant's connections
//   GET    /api/forges/{id}
//   DELETE /api/forges/{id}             409 while applications are linked
//   GET    /api/forges/{id}/deliveries  each delivery's outcome and reasons
//   PUT    /api/applications/{id}/forge-repository  {connection_id, project}
//   DELETE /api/applications/{id}/forge-repository
// Writes are an owner's, reads a viewer's. Sealing needs RELAYCTL_MASTER_KEY.
import { z } from "zod";
import { getApplication } from "../applications/store.js";
import { checkRepository, compileBuild } from "../applications/source.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { requireMasterKey } from "../registry/credentials.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { queryInt } from "../http/validation.js";
import {
  FORGE_KINDS,
  apiToken,
  createConnection,
  deleteConnection,
  getConnection,
  presentConnection,
} from "./connections.js";
import type { ForgeLink } from "./context.js";
import { listForgeDeliveries } from "./deliveries.js";
import { gitlabProject } from "./forge-api.js";

const createBody = z.strictObject({
  kind: z.enum(FORGE_KINDS),
  name: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, { error: "letters, digits, '.', '_' and '-'" }),
  base_url: z.string().min(1).max(512),
  api_token: z.string().min(1).max(4096),
});
const idParams = z.object({ id: z.string() });
const pageQuery = z.strictObject({
  limit: queryInt(1, 100).optional(),
  cursor: z
    .string()
    .regex(/^\d{1,18}$/, { error: "must be a next_cursor value" })
    .optional(),
});
/** A project's path (group/sub/repo), or GitLab's numeric project id. */
const PROJECT_PATH = /^[A-Za-z0-9_.][A-Za-z0-9_.-]*(?:\/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+$/;
const linkBody = z.strictObject({
  connection_id: z.string().min(1).max(64),
  project: z
    .string()
    .min(1)
    .max(512)
    .refine((p) => /^\d{1,18}$/.test(p) || (PROJECT_PATH.test(p) && !p.split("/").includes("..")), {
      error: "a project path such as group/sub/repo (or GitLab's numeric project id)",
    }),
});

export const forgeRoutes = (ctx: ApiContext): RouteSpec[] => {
  const publicUrl = ctx.config.publicUrl;
  const sealing = { preParsing: async () => void requireMasterKey(ctx.config.masterKey) };
  const linkPath = "/api/applications/:id/forge-repository";
  return [
    route({
      method: "POST",
      url: "/api/forges",
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      summary: "Connect a GitLab, Gitea or Forgejo: its webhook URL and secret (shown once) come back",
      schema: { body: createBody },
      options: sealing,
      handler: async (req, reply) => {
        const p = req.principal;
        const facts = auditActor(p, req.ip);
        const by = p.keyName;
        const { row, secret, warning } = await createConnection(
          ctx.db,
          requireMasterKey(ctx.config.masterKey),
          p.tenantId,
          req.body,
          by,
          facts,
        );
        return reply.status(201).send({
          ...presentConnection(row, publicUrl),
          webhook_secret: secret,
          ...(warning ? { warning } : {}),
        });
      },
    }),
    route({
      method: "GET",
      url: "/api/forges",
      access: { credentials: MANAGEMENT },
      tag: "management",
      handler: async (req) => {
        const rows = await ctx
          .db("forge_connections")
          .where({ tenant_id: req.principal.tenantId })
          .orderBy("name");
        return { forges: rows.map((r) => presentConnection(r, publicUrl)) };
      },
    }),
    route({
      method: "GET",
      url: "/api/forges/:id",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: idParams },
      handler: async (req) =>
        presentConnection(await getConnection(ctx.db, req.principal.tenantId, req.params.id), publicUrl),
    }),
    route({
      method: "DELETE",
      url: "/api/forges/:id",
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      schema: { params: idParams },
      handler: async (req, reply) => {
        await deleteConnection(
          ctx.db,
          req.principal.tenantId,
          req.params.id,
          auditActor(req.principal, req.ip),
        );
        return reply.status(204).send();
      },
    }),
    route({
      method: "GET",
      url: "/api/forges/:id/deliveries",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: idParams, querystring: pageQuery },
      handler: async (req) => {
        const c = await getConnection(ctx.db, req.principal.tenantId, req.params.id);
        const cursor = req.query.cursor === undefined ? undefined : Number(req.query.cursor);
        return listForgeDeliveries(ctx.db, c.id, req.query.limit ?? 20, cursor);
      },
    }),
    route({
      method: "PUT",
      url: linkPath,
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      summary:
        "Link an application to a GitLab/Gitea/Forgejo project: pushes deploy it, statuses report back",
      schema: { params: idParams, body: linkBody },
      options: sealing,
      handler: async (req) => {
        const tenantId = req.principal.tenantId;
        const a = await getApplication(ctx.db, tenantId, req.params.id);
        const c = await getConnection(ctx.db, tenantId, req.body.connection_id);
        const project = req.body.project;
        let cloneUrl = `${c.base_url}/${project}.git`;
        let path = project;
        if (/^\d+$/.test(project)) {
          if (c.kind !== "gitlab")
            throw new RcError(
              "RC_ERR_VALIDATION",
              "project: Gitea and Forgejo projects are named by owner/repo",
            );
          const found = await gitlabProject(
            c.base_url,
            apiToken(requireMasterKey(ctx.config.masterKey), c),
            project,
          ).catch(() => undefined);
          if (!found)
            throw new RcError(
              "RC_ERR_VALIDATION",
              `project: GitLab did not show project ${project} to the connection's token`,
            );
          cloneUrl = found.cloneUrl;
          path = found.path;
        } else if (c.kind !== "gitlab" && project.split("/").length !== 2)
          throw new RcError("RC_ERR_VALIDATION", "project: Gitea and Forgejo projects are owner/repo");
        checkRepository(cloneUrl);
        // Linked, the project is the source: an application without a build
        // gets the default Dockerfile build (as the GitHub link does).
        const build = a.build ?? JSON.stringify(compileBuild(null, true));
        await ctx.db.transaction(async (trx) => {
          await trx("applications").where({ id: a.id }).update({
            forge_connection_id: c.id,
            forge_project: project,
            github_repository_id: null,
            git_repository: cloneUrl,
            build,
            updated_at: Date.now(),
          });
          await appendAuditEvent(trx, {
            tenantId,
            eventType: "application.forge_linked",
            serverId: a.server_id,
            payload: {
              application_id: a.id,
              application_name: a.name,
              connection_id: c.id,
              forge: c.kind,
              project,
              ...(a.build ? {} : { build: "dockerfile (default)" }),
              ...auditActor(req.principal, req.ip),
            },
          });
        });
        return { connection_id: c.id, kind: c.kind, project, path, clone_url: cloneUrl, deployable: true };
      },
    }),
    route({
      method: "GET",
      url: linkPath,
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { params: idParams },
      handler: async (req) => {
        const a = (await getApplication(ctx.db, req.principal.tenantId, req.params.id)) as ForgeLink & {
          git_repository: string | null;
        };
        if (!a.forge_connection_id)
          return { connection_id: null, project: null, deployable: false, reason: "not linked" };
        return {
          connection_id: a.forge_connection_id,
          project: a.forge_project,
          clone_url: a.git_repository,
          deployable: true,
        };
      },
    }),
    route({
      method: "DELETE",
      url: linkPath,
      access: { credentials: MANAGEMENT, role: "owner" },
      tag: "management",
      schema: { params: idParams },
      handler: async (req, reply) => {
        const a = await getApplication(ctx.db, req.principal.tenantId, req.params.id);
        await ctx.db.transaction(async (trx) => {
          await trx("applications")
            .where({ id: a.id })
            .update({ forge_connection_id: null, forge_project: null, updated_at: Date.now() });
          await appendAuditEvent(trx, {
            tenantId: a.tenant_id,
            eventType: "application.forge_unlinked",
            serverId: a.server_id,
            payload: { application_id: a.id, application_name: a.name, ...auditActor(req.principal, req.ip) },
          });
        });
        return reply.status(204).send();
      },
    }),
  ];
};

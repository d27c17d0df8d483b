// /api/servers/{id} (management API): one server's page (GET: presence, agent,
// engine, uptime, applications, recent operations) and its removal (DELETE,
// owner only: revokes the agent, removal.ts). The list, GET /api/servers, is
// declared with the applications (applications/applications-api.ts).
import { z } from "zod";
import { auditActor } from "../auth/principal.js";
import { server } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../http/route.js";
import { uuidSchema } from "../http/schemas.js";
import { serverDetail } from "./detail.js";
import { removeServer } from "./removal.js";

const params = z.object({ server_id: uuidSchema });

const iso = z.string().describe("ISO 8601 date-time (UTC)");
const o = z.looseObject;

const serverPage = server
  .extend({
    applications: z.array(o({ id: z.string(), name: z.string() })).describe("applications placed on it"),
    recent_operations: z
      .array(
        o({
          operation_id: z.string(),
          operation_type: z.string(),
          status: z.string(),
          exit_code: z.int().nullable(),
          started_at: iso,
          completed_at: iso.nullable(),
          deployment_id: z.string().nullable(),
          application_name: z.string().nullable(),
        }),
      )
      .describe("its newest operations, newest first (10)"),
  })
  .meta({ id: "ServerPage" });

const removed = o({ server_id: z.string(), server_name: z.string(), removed_at: iso }).meta({
  id: "ServerRemoved",
});

export const serverRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: "/api/servers/:server_id",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { params },
    responses: { 200: serverPage },
    handler: async (req) => serverDetail(ctx.db, ctx.bus, req.principal.tenantId, req.params.server_id),
  }),
  route({
    method: "DELETE",
    url: "/api/servers/:server_id",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { params },
    responses: { 200: removed },
    handler: async (req) =>
      removeServer(
        ctx.db,
        ctx.bus,
        req.principal.tenantId,
        req.params.server_id,
        auditActor(req.principal, req.ip),
      ),
  }),
];

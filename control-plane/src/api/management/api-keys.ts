// /api/api-keys — the dashboard's "API Keys" tab: create (the rck_ secret in
// this answer only), list (no secrets), revoke (204; the key's next request is
// 401). The work is auth/api-key.ts's, which the admin CLI calls too. Changes are
// owner only and audited with the caller as the actor.
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { createApiKey, listApiKeys, revokeApiKey } from "../../auth/api-key.js";
import type { AuditActor } from "../../auth/automation-key-service.js";
import { auditActor } from "../../auth/principal.js";
import { RcError } from "../../errors.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";
import { isUuid } from "../../http/validation.js";

const createBody = z.strictObject({ name: z.string().trim().min(1).max(128) });
const params = z.object({ id: z.string() });

const actorOf = (req: FastifyRequest) => auditActor(req.principal, req.ip) as AuditActor;

export const apiKeysRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: "/api/api-keys",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { body: createBody },
    handler: async (req, reply) => {
      const { name } = req.body;
      const made = await createApiKey(ctx.db, req.principal.tenantId, name, actorOf(req));
      return reply.status(201).send({ id: made.key_id, name, key: made.key, created_at: made.created_at });
    },
  }),
  route({
    method: "GET",
    url: "/api/api-keys",
    access: { credentials: MANAGEMENT },
    tag: "management",
    handler: async (req) => ({ api_keys: await listApiKeys(ctx.db, req.principal.tenantId) }),
  }),
  route({
    method: "DELETE",
    url: "/api/api-keys/:id",
    access: { credentials: MANAGEMENT, role: "owner" },
    tag: "management",
    schema: { params },
    handler: async (req, reply) => {
      const { id } = req.params;
      const revoked = isUuid(id)
        ? await revokeApiKey(ctx.db, id, actorOf(req), req.principal.tenantId)
        : null;
      if (!revoked) throw new RcError("RC_ERR_API_KEY_NOT_FOUND", `API key '${id}' not found`);
      return reply.status(204).send();
    },
  }),
];

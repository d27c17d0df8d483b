// /api/api-keys — the dashboard's "API Keys" tab: create (the rck_ secret in
// this answer only), list (no secrets), revoke (204; the key's next request is
// 401). The work is auth/api-key.ts's, which the admin CLI calls too. Changes are
// owner only (oauth/principal.ts) and audited with the caller as the actor.
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { createApiKey, listApiKeys, revokeApiKey } from "../../auth/api-key.js";
import type { AuditActor } from "../../auth/automation-key-service.js";
import { actorPayload } from "../../auth/security-audit.js";
import { RcError } from "../../errors.js";
import { isUuid } from "../../http/validation.js";
import type { ApiContext } from "../../http/context.js";

const createBody = z.strictObject({ name: z.string().trim().min(1).max(128) });
const params = z.object({ id: z.string() });

const actorOf = (req: FastifyRequest) =>
  actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip) as AuditActor;

export const apiKeysRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.post("/api-keys", { schema: { body: createBody } }, async (req, reply) => {
      const { name } = req.body;
      const made = await createApiKey(ctx.db, req.apiPrincipal.tenantId, name, actorOf(req));
      return reply.status(201).send({ id: made.key_id, name, key: made.key, created_at: made.created_at });
    });

    app.get("/api-keys", async (req) => ({ api_keys: await listApiKeys(ctx.db, req.apiPrincipal.tenantId) }));

    app.delete("/api-keys/:id", { schema: { params } }, async (req, reply) => {
      const { id } = req.params;
      const revoked = isUuid(id)
        ? await revokeApiKey(ctx.db, id, actorOf(req), req.apiPrincipal.tenantId)
        : null;
      if (!revoked) throw new RcError("RC_ERR_API_KEY_NOT_FOUND", `API key '${id}' not found`);
      return reply.status(204).send();
    });
  };

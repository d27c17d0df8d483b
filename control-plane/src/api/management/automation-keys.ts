// /api/automation-keys — create, list, update and revoke the tenant's automation
// keys (X-API-Key auth). The work is the key service's (auth/automation-key-service.ts),
// which the operator CLI calls too; the `rca_` secret is in the create response only.
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import {
  type AuditActor,
  createAutomationKey,
  keyCreateSchema,
  keyPatchSchema,
  listAutomationKeys,
  revokeAutomationKey,
  updateAutomationKey,
} from "../../auth/automation-key-service.js";
import { actorPayload } from "../../auth/security-audit.js";
import type { ApiContext } from "../../http/context.js";

const params = z.object({ id: z.string() });

const actorOf = (req: FastifyRequest) =>
  actorPayload({ ...req.apiPrincipal, keyType: "api_key" }, req.ip) as AuditActor;

export const automationKeysRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.post("/automation-keys", { schema: { body: keyCreateSchema } }, async (req, reply) => {
      const created = await createAutomationKey(ctx.db, req.apiPrincipal.tenantId, req.body, actorOf(req));
      return reply.status(201).send(created);
    });

    app.get("/automation-keys", async (req) => ({
      automation_keys: await listAutomationKeys(ctx.db, req.apiPrincipal.tenantId),
    }));

    app.patch("/automation-keys/:id", { schema: { params, body: keyPatchSchema } }, async (req) =>
      updateAutomationKey(ctx.db, req.apiPrincipal.tenantId, req.params.id, req.body, actorOf(req)),
    );

    app.delete("/automation-keys/:id", { schema: { params } }, async (req, reply) => {
      await revokeAutomationKey(ctx.db, req.apiPrincipal.tenantId, req.params.id, actorOf(req));
      return reply.status(204).send();
    });
  };

// The management API under /api, authenticated with a regular API key
// (`X-API-Key: rck_...`, full access to its tenant) in an onRequest hook, and
// limited per key to 100 requests a minute and 1,000 an hour (429 beyond).
import type { FastifyPluginAsync } from "fastify";
import { API_KEY_WINDOWS, authenticateApiKey } from "../../auth/api-key.js";
import { auditRefusals, enforceRateLimit } from "../../auth/security-audit.js";
import type { ApiContext } from "../context.js";
import { applicationsRoutes } from "../../applications/applications-api.js";
import { providerBindingRoutes } from "../../reboot/bindings-api.js";
import { auditRoute } from "./audit.js";
import { automationKeysRoutes } from "./automation-keys.js";

export const managementApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.decorateRequest("apiPrincipal", null as never);
    app.decorateRequest("keyActor", null);
    app.addHook("onRequest", async (req, reply) => {
      req.apiPrincipal = await authenticateApiKey(ctx.db, req);
      await enforceRateLimit(ctx.db, req.log, reply, req.keyActor!, req.ip, API_KEY_WINDOWS);
    });
    app.addHook("onError", auditRefusals(ctx.db));
    await app.register(automationKeysRoutes(ctx));
    await app.register(auditRoute(ctx));
    await app.register(providerBindingRoutes(ctx));
    await app.register(applicationsRoutes(ctx));
  };

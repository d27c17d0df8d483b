// The management API under /api, authenticated with a regular API key
// (`X-API-Key: rck_...`, full access to its tenant) by apiKeyAuth, and limited
// per key to 100 requests a minute and 1,000 an hour (429 beyond).
import type { FastifyPluginAsync } from "fastify";
import { applicationsRoutes } from "../../applications/applications-api.js";
import { apiKeyAuth } from "../../auth/plugins.js";
import { deploymentsRoutes } from "../../deployments/routes.js";
import { githubRoutes } from "../../github/routes.js";
import { providerBindingRoutes } from "../../reboot/bindings-api.js";
import { registryCredentialsApi } from "../../registry/credentials-api.js";
import type { ApiContext } from "../../http/context.js";
import { auditRoute } from "./audit.js";
import { activityRoutes } from "./activity.js";
import { apiKeysRoutes } from "./api-keys.js";
import { auditVerifyRoute } from "./audit-verify.js";
import { automationKeysRoutes } from "./automation-keys.js";
import { joinTokensRoute } from "./join-tokens.js";

export const managementApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    await app.register(apiKeyAuth, { db: ctx.db });
    await app.register(automationKeysRoutes(ctx));
    await app.register(auditRoute(ctx));
    await app.register(providerBindingRoutes(ctx));
    await app.register(applicationsRoutes(ctx));
    await app.register(registryCredentialsApi(ctx), { prefix: "/registry-credentials" });
    await app.register(deploymentsRoutes(ctx));
    await app.register(githubRoutes(ctx));
    // The dashboard's additions (issue 15).
    await app.register(joinTokensRoute(ctx));
    await app.register(apiKeysRoutes(ctx));
    await app.register(activityRoutes(ctx));
    await app.register(auditVerifyRoute(ctx));
  };

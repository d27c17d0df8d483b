// The Automation API (/api/automation/v1): every route authenticates with an
// automation key (automationKeyAuth, an onRequest hook), before its body is even
// validated; then the route checks its operation and server scope.
import type { FastifyPluginAsync } from "fastify";
import { automationKeyAuth } from "../../auth/plugins.js";
import type { ApiContext } from "../../http/context.js";
import { deployRoute } from "./deploy.js";
import { execRoute } from "./exec.js";
import { operationsRoute } from "./operations.js";
import { rebootRoute } from "./reboot.js";
import { registryAuthRoutes } from "./registry-auth.js";
import { restartRoute } from "./restart.js";

export const automationApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    await app.register(automationKeyAuth, { db: ctx.db });
    await app.register(execRoute(ctx));
    await app.register(operationsRoute(ctx));
    await app.register(restartRoute(ctx));
    await app.register(rebootRoute(ctx));
    await app.register(registryAuthRoutes(ctx));
    await app.register(deployRoute(ctx));
  };

// The Automation API (/api/automation/v1): every route authenticates with an
// automation key in an onRequest hook, before its body is even validated.
import type { FastifyPluginAsync } from "fastify";
import { admitAutomationKey } from "../../auth/admit-automation-key.js";
import { auditRefusals } from "../../auth/security-audit.js";
import type { ApiContext } from "../context.js";
import { execRoute } from "./exec.js";
import { operationsRoute } from "./operations.js";
import { rebootRoute } from "./reboot.js";
import { registryAuthRoutes } from "./registry-auth.js";
import { restartRoute } from "./restart.js";

export const automationApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.decorateRequest("principal", null as never);
    app.decorateRequest("keyActor", null);
    // Order: who (401), from where (403), how often (429); scope checks of the
    // server and operation are the routes' (they know what is asked).
    app.addHook("onRequest", async (req, reply) => {
      req.principal = await admitAutomationKey(ctx.db, req, reply);
    });
    app.addHook("onError", auditRefusals(ctx.db));
    await app.register(execRoute(ctx));
    await app.register(operationsRoute(ctx));
    await app.register(restartRoute(ctx));
    await app.register(rebootRoute(ctx));
    await app.register(registryAuthRoutes(ctx));
  };

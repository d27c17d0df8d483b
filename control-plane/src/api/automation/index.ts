// The Automation API (/api/automation/v1): every route authenticates with an
// automation key in an onRequest hook, before its body is even validated.
import type { FastifyPluginAsync } from "fastify";
import { authenticateAutomationKey } from "../../auth/automation-key.js";
import type { ApiContext } from "../context.js";
import { execRoute } from "./exec.js";
import { operationsRoute } from "./operations.js";

export const automationApi =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.decorateRequest("principal", null as never);
    app.addHook("onRequest", async (req) => {
      req.principal = await authenticateAutomationKey(ctx.db, req);
    });
    await app.register(execRoute(ctx));
    await app.register(operationsRoute(ctx));
  };

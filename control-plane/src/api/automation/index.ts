// The Automation API (/api/automation/v1): every route authenticates with an
// automation key in an onRequest hook, before its body is even validated.
import type { FastifyPluginAsync } from "fastify";
import { authenticateAutomationKey } from "../../auth/automation-key.js";
import { ipAllowed } from "../../auth/ip-allowlist.js";
import { auditRefusals, enforceRateLimit } from "../../auth/security-audit.js";
import { RcError } from "../../errors.js";
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
      const p = await authenticateAutomationKey(ctx.db, req);
      req.principal = p;
      if (!ipAllowed(p.ipAllowlist, req.ip)) {
        throw new RcError("RC_ERR_IP_NOT_ALLOWED", `caller IP ${req.ip} is not in this key's IP allowlist`);
      }
      const actor = req.keyActor!;
      await enforceRateLimit(ctx.db, req.log, reply, actor, req.ip, [{ seconds: 60, limit: p.rateLimit }]);
    });
    app.addHook("onError", auditRefusals(ctx.db));
    await app.register(execRoute(ctx));
    await app.register(operationsRoute(ctx));
    await app.register(restartRoute(ctx));
    await app.register(rebootRoute(ctx));
    await app.register(registryAuthRoutes(ctx));
  };

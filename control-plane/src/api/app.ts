// Builds the Fastify api: error handling, the Automation API, agent enrollment.
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import type { Logger } from "pino";
import { enrollRoute as agentEnrollRoute } from "./agent-enroll.js";
import type { ApiContext } from "./context.js";
import { installErrorHandling } from "./errors.js";
import { automationApi } from "./automation/index.js";
import { registryCredentialsApi } from "../registry/credentials-api.js";
import { managementApi } from "./management/index.js";
import { externalDeployApi } from "../external-deploy/routes.js";

export async function buildApi(
  ctx: ApiContext,
  log: Logger,
  gatewayUrls: () => string[],
): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: log.child({ component: "api" }) as FastifyBaseLogger,
    // One debug line per request (onResponse below) instead of two info lines.
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: ctx.config.trustProxy,
    bodyLimit: 1024 * 1024,
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
  });
  installErrorHandling(app);
  // JSON only: without this, text/plain bodies would be parsed as strings and
  // reach validation instead of getting a 415.
  app.removeContentTypeParser("text/plain");
  app.addHook("onResponse", async (req, reply) => {
    req.log.debug(
      { method: req.method, url: req.url.split("?")[0], status: reply.statusCode, ms: reply.elapsedTime },
      "request",
    );
  });
  app.get("/healthz", async () => ({ status: "ok" }));
  await app.register(automationApi(ctx), { prefix: "/api/automation/v1" });
  await app.register(managementApi(ctx), { prefix: "/api" });
  await app.register(externalDeployApi(ctx), { prefix: "/external-deploy" });
  await app.register(agentEnrollRoute(ctx, gatewayUrls));
  await app.register(registryCredentialsApi(ctx), { prefix: "/api/registry-credentials" });
  return app;
}

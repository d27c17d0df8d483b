// Builds the Fastify api: transport limits, error handling, route validation
// (zod), the Automation API, the management API, external deploy and agent
// enrollment, and the MCP endpoint (a client of the rest).
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { usersApi } from "../accounts/users-api.js";
import { webRoutes } from "../accounts/web-routes.js";
import { externalDeployApi } from "../external-deploy/routes.js";
import { mcpRoutes } from "../mcp/routes.js";
import { authorizePage } from "../oauth/authorize-page.js";
import { devicePage } from "../oauth/device-page.js";
import { oauthRoutes } from "../oauth/routes.js";
import { dashboardRoutes } from "../dashboard/static.js";
import { setupRoute } from "../github/routes.js";
import { requestTracing } from "../tracing/http.js";
import { BOUND_REQUEST_ID, requestIdFrom } from "../tracing/request-id.js";
import { webhookRoute } from "../github/webhook-route.js";
import { cliInstallRoutes } from "../install/cli-routes.js";
import { installRoutes } from "../install/routes.js";
import { enrollRoute as agentEnrollRoute } from "./agent-enroll.js";
import { automationApi } from "./automation/index.js";
import type { ApiContext } from "../http/context.js";
import { installErrorHandling } from "./errors.js";
import { managementApi } from "./management/index.js";
import { healthRoutes } from "../observability/health.js";
import { httpMetrics, metricsRoute } from "../observability/http-metrics.js";
import { installOpenApi } from "../observability/openapi.js";
import { serializerCompiler, validatorCompiler } from "../http/validation.js";

/** Fastify's trustProxy from RELAYCTL_TRUSTED_PROXIES (proxy-addr walks X-Forwarded-For from the right). */
function trustProxy(c: Config["trustProxy"]) {
  if (typeof c !== "number") return c;
  return (_address: string, hop: number) => hop < c;
}

export async function buildApi(
  ctx: ApiContext,
  log: Logger,
  gatewayUrls: () => string[],
): Promise<FastifyInstance> {
  const { http } = ctx.config;
  const app = Fastify({
    loggerInstance: log.child({ component: "api" }) as FastifyBaseLogger,
    // One debug line per request (onResponse below) instead of two info lines.
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: "req_id" }),
    // The caller's X-Request-Id when sane (tracing/request-id.ts), else a UUID.
    genReqId: (req) => requestIdFrom(req.headers["x-request-id"]),
    childLoggerFactory: (logger, bindings, opts) => {
      const child = logger.child(bindings, opts);
      // Bound here already: the logger's mixin must not add req_id a second time.
      Object.assign(child, { [BOUND_REQUEST_ID]: true });
      return child;
    },
    trustProxy: trustProxy(ctx.config.trustProxy),
    bodyLimit: 1024 * 1024,
    // A slow client (headers or body trickled) is answered 408 and cut off;
    // checked every second rather than Node's default 30 s.
    requestTimeout: http.requestTimeoutMs,
    connectionTimeout: http.connectionTimeoutMs,
    http: {
      headersTimeout: http.headersTimeoutMs,
      maxHeaderSize: http.maxHeaderBytes,
      connectionsCheckingInterval: 1000,
    },
  }) as unknown as FastifyInstance;
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  // Observability first: the OpenAPI hook and the request timer must see every route.
  await installOpenApi(app);
  await app.register(httpMetrics);
  await app.register(requestTracing);
  // JSON only: without this, text/plain bodies would be parsed as strings and
  // reach validation instead of getting a 415.
  app.removeContentTypeParser("text/plain");
  app.addHook("onResponse", async (req, reply) => {
    req.log.debug(
      { method: req.method, url: req.url.split("?")[0], status: reply.statusCode, ms: reply.elapsedTime },
      "request",
    );
  });
  const busName = ctx.config.bus === "nats" ? "nats" : "job bus";
  await app.register(healthRoutes({ db: ctx.db, bus: ctx.bus, busName }));
  await app.register(metricsRoute({ token: ctx.config.metrics.token }));
  await app.register(automationApi(ctx), { prefix: "/api/automation/v1" });
  await app.register(managementApi(ctx), { prefix: "/api" });
  await app.register(externalDeployApi(ctx), { prefix: "/external-deploy" });
  await app.register(agentEnrollRoute(ctx, gatewayUrls));
  await app.register(installRoutes(ctx));
  await app.register(cliInstallRoutes(ctx));
  // People: sign-in pages, OAuth (device flow, authorization code grant) and its pages, users.
  await app.register(webRoutes(ctx));
  await app.register(oauthRoutes(ctx));
  await app.register(devicePage(ctx));
  await app.register(authorizePage(ctx));
  await app.register(usersApi(ctx), { prefix: "/api" });
  // AI coding tools: the MCP endpoint, a client of the API above.
  await app.register(mcpRoutes(ctx));
  await app.register(webhookRoute(ctx.github));
  await app.register(setupRoute(ctx));
  // The web dashboard's pages (web/dist) under /app/.
  await app.register(dashboardRoutes(ctx));
  return app;
}

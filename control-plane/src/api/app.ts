// Builds the Fastify api: transport limits, error handling, route validation
// (zod), observability, then every route of api/routes.ts through
// registerRoutes (authentication, roles, scopes, rate limits and the OpenAPI
// description come from each route's declaration), and the dashboard's assets.
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import { dashboardAssets } from "../dashboard/static.js";
import type { ApiContext } from "../http/context.js";
import { serializerCompiler, validatorCompiler } from "../http/validation.js";
import { httpMetrics } from "../observability/http-metrics.js";
import { installOpenApi } from "../observability/openapi.js";
import { lazyChildLogger } from "../lib/lazy-logger.js";
import { requestTracing } from "../tracing/http.js";
import { BOUND_REQUEST_ID, requestIdFrom } from "../tracing/request-id.js";
import { installErrorHandling } from "../http/errors.js";
import { installEdge } from "../http/edge.js";
import { MCP_PATH } from "../mcp/routes.js";
import { registerRoutes } from "./register-routes.js";
import { apiRoutes } from "./routes.js";

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
    // Made only when the request logs a line (lib/lazy-logger.ts); bound to the request id
    // already, so the logger's mixin must not add req_id a second time.
    childLoggerFactory: (logger, bindings, opts) =>
      lazyChildLogger(logger, bindings, opts, (child) => Object.assign(child, { [BOUND_REQUEST_ID]: true })),
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
  // Host, Origin and the security headers of every answer (http/edge.ts): before any route
  // or plugin that registers routes (/docs), which only see the hooks added before them.
  installEdge(app, ctx.config, MCP_PATH);
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
  const closing = new AbortController();
  // preClose, not onClose: Fastify runs onClose only once in-flight requests have ended, and a
  // followed live log only ends when told to, so close() would wait for every deployment.
  app.addHook("preClose", async () => closing.abort());
  await registerRoutes(app, apiRoutes(ctx, gatewayUrls, app, closing.signal), {
    db: ctx.db,
    metricsToken: ctx.config.metrics.token,
  });
  // The dashboard's hashed assets: @fastify/static's own routes (hidden from the document).
  await app.register(dashboardAssets());
  return app;
}

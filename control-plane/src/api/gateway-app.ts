// The gateway role's own small HTTP app (RELAYCTL_GATEWAY_METRICS_LISTEN):
// /metrics, /healthz and /readyz, for a role that otherwise speaks only gRPC.
// Nothing else is served here; errors answer `{"detail"}` like the api.
import Fastify, { type FastifyBaseLogger, LogController } from "fastify";
import type { Logger } from "pino";
import { registerRoutes } from "./register-routes.js";
import { installErrorHandling } from "../http/errors.js";
import { serializerCompiler, validatorCompiler } from "../http/validation.js";
import { type HealthOptions, healthRoutes } from "../observability/health.js";
import { httpMetrics, metricsRoutes } from "../observability/http-metrics.js";

export interface GatewayHttp {
  url: string;
  close(): Promise<void>;
}

export async function startGatewayHttp(
  listen: { host: string; port: number },
  health: HealthOptions,
  token: string | undefined,
  log: Logger,
): Promise<GatewayHttp> {
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installErrorHandling(app);
  await app.register(httpMetrics);
  await registerRoutes(app, [...healthRoutes(health), ...metricsRoutes()], {
    db: health.db,
    metricsToken: token,
  });
  await app.listen({ host: listen.host, port: listen.port });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : listen.port;
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  return { url: `http://${host}:${port}`, close: () => app.close() };
}

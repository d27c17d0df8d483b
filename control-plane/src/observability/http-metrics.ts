// Metrics of a Fastify app (the api, or the gateway role's small listener):
// every answer timed by its route pattern (never the raw URL, so ids and query
// strings make no new series), 429s counted as rate-limit refusals, and the
// scrape endpoint itself, optionally behind a bearer token.
import { timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { RcError } from "../errors.js";
import { httpDuration, rateLimitRefusals, registry } from "./metrics.js";

export interface MetricsRouteOptions {
  /** RELAYCTL_METRICS_TOKEN: when set, a scrape must send `Authorization: Bearer <token>`. */
  token: string | undefined;
}

/** Route label of requests no route matched (404s, probes): one series, whatever the URL. */
const UNMATCHED = "unmatched";

/** Times every answer of the app it is registered on (register it before the routes). */
export const httpMetrics = fp(
  async (app: FastifyInstance) => {
    app.addHook("onResponse", async (req, reply) => {
      const route = req.routeOptions.url ?? UNMATCHED;
      httpDuration.observe(
        { method: req.method, route, status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
      if (reply.statusCode === 429) rateLimitRefusals.inc({ route });
    });
  },
  { name: "relayctl-http-metrics", fastify: "5.x" },
);

function bearerMatches(req: FastifyRequest, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1] ?? "");
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** GET /metrics in Prometheus' text format. */
export function metricsRoute(opts: MetricsRouteOptions) {
  return async (app: FastifyInstance) => {
    app.get(
      "/metrics",
      {
        schema: {
          tags: ["observability"],
          summary: "Prometheus metrics of this process",
          ...(opts.token ? { security: [{ metricsToken: [] }] } : {}),
        },
      },
      async (req, reply) => {
        if (opts.token && !bearerMatches(req, opts.token)) throw new RcError("RC_ERR_UNAUTHENTICATED");
        return reply.type(registry.contentType).send(await registry.metrics());
      },
    );
  };
}

// Metrics of a Fastify app (the api, or the gateway role's small listener):
// every answer timed by its route pattern (never the raw URL, so ids and query
// strings make no new series), 429s counted as rate-limit refusals, and the
// scrape endpoint itself, behind RELAYCTL_METRICS_TOKEN when one is set (the
// `metrics_token` credential, checked by api/admission.ts).
import type { FastifyInstance } from "fastify";
import fp from "fastify-plugin";
import { type RouteSpec, route } from "../http/route.js";
import { httpDuration, rateLimitRefusals, registry } from "./metrics.js";

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

/** GET /metrics in Prometheus' text format. */
export function metricsRoutes(): RouteSpec[] {
  return [
    route({
      method: "GET",
      url: "/metrics",
      access: { credentials: ["metrics_token"] },
      tag: "observability",
      summary: "Prometheus metrics of this process",
      handler: async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()),
    }),
  ];
}

// Request ids and the server span of every API request, as one Fastify plugin:
// onRequest enters the request's async context (its id for the logs, its span
// for tracing) and answers X-Request-Id; onResponse ends the span. Register it
// after startTracing (serve.ts does): whether to trace is decided then.
import { AsyncResource } from "node:async_hooks";
import { type Context, type Span, SpanKind, SpanStatusCode, context, trace } from "@opentelemetry/api";
import type { FastifyPluginCallback, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { contextFrom, tracer, tracingOn } from "./index.js";
import { withRequestId } from "./request-id.js";

const kScope = Symbol("relayctl.requestScope");
const kSpan = Symbol("relayctl.requestSpan");

type Scoped = FastifyRequest & { [kScope]?: AsyncResource; [kSpan]?: Span };

/** The request's span, child of the caller's traceparent if any, and the context it makes. */
function startServerSpan(req: FastifyRequest): { span: Span; ctx: Context } {
  const route = req.routeOptions.url ?? "unmatched";
  const parent = contextFrom(req.headers);
  const span = tracer().startSpan(
    `${req.method} ${route}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        "http.request.method": req.method,
        "http.route": route,
        "url.path": req.url.split("?")[0],
        "relayctl.request_id": req.id,
      },
    },
    parent,
  );
  return { span, ctx: trace.setSpan(parent, span) };
}

const plugin: FastifyPluginCallback = (app, _opts, next) => {
  // Decided once: with tracing off the span hooks are not even registered.
  const traced = tracingOn();
  app.addHook("onRequest", (req: Scoped, reply, done) => {
    reply.header("x-request-id", req.id);
    const started = traced ? startServerSpan(req) : undefined;
    req[kSpan] = started?.span;
    const enter = () =>
      withRequestId(req.id, () => {
        // Captures both stores (request id, OpenTelemetry context) for preValidation.
        req[kScope] = new AsyncResource("relayctl.request");
        done();
      });
    if (started) context.with(started.ctx, enter);
    else enter();
  });
  // The body is parsed in the socket's async context, not the request's: enter it
  // again before validation, the handler and everything they call (the same fix
  // as @fastify/request-context).
  app.addHook("preValidation", (req: Scoped, _reply, done) => {
    const scope = req[kScope];
    if (scope) scope.runInAsyncScope(done);
    else done();
  });
  if (traced) {
    app.addHook("onResponse", (req: Scoped, reply, done) => {
      const span = req[kSpan];
      if (span) {
        span.setAttribute("http.response.status_code", reply.statusCode);
        if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
      done();
    });
  }
  next();
};

export const requestTracing = fp(plugin, { name: "relayctl-request-tracing" });

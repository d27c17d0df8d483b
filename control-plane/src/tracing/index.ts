// Tracing for the control plane: OpenTelemetry spans over the exec path (HTTP
// request → database → NATS publish → gateway → the Job to the agent). Off by
// default, and then free: no SDK is loaded, and every helper here returns after
// one boolean check without touching the OpenTelemetry API. Turning the SDK on and
// off is @relayctl/tracing's, which the agent shares.
import {
  type Context,
  type Span,
  type SpanOptions,
  SpanStatusCode,
  context,
  propagation,
  trace,
} from "@opentelemetry/api";
import { loadedOtelPackages, tracingOn } from "@relayctl/tracing";
import type { Logger } from "pino";

export { startTracing, stopTracing, tracingOn } from "@relayctl/tracing";

export const tracer = () => trace.getTracer("relayctl");

/** One debug line after start: whether tracing is on and which OTel packages are loaded. */
export function logTracingState(log: Logger, serviceName: string): void {
  log.debug(
    { tracing: tracingOn() ? "otlp" : "off", service_name: serviceName, otel_modules: loadedOtelPackages() },
    "tracing",
  );
}

/** W3C trace context of the active span, as a carrier (traceparent, tracestate); {} when off. */
export function activeTraceContext(): Record<string, string> {
  const carrier: Record<string, string> = {};
  if (tracingOn()) propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context a carrier names (the active one when it names none). */
export function contextFrom(carrier: Record<string, string | string[] | undefined>): Context {
  return propagation.extract(context.active(), carrier);
}

/**
 * Runs fn inside a new span (child of `parent`, default the active context);
 * the span ends when fn settles and is marked an error when fn throws. Off: fn().
 */
export function inSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: Span | undefined) => Promise<T>,
  parent?: Context,
): Promise<T> {
  if (!tracingOn()) return fn(undefined);
  return tracer().startActiveSpan(name, options, parent ?? context.active(), async (span) => {
    try {
      return await fn(span);
    } catch (err) {
      span.recordException(err as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  });
}

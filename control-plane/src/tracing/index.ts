// Tracing for the control plane: OpenTelemetry spans over the exec path (HTTP
// request → database → NATS publish → gateway → the Job to the agent). Off by
// default, and then free: no SDK is loaded, and every helper here returns after
// one boolean check without touching the OpenTelemetry API.
import {
  type Context,
  type Span,
  type SpanOptions,
  SpanStatusCode,
  context,
  propagation,
  trace,
} from "@opentelemetry/api";
import type { Logger } from "pino";
import type { Sdk } from "./sdk.js";

let sdk: Sdk | undefined;

/** True once startTracing turned the SDK on in this process. */
export function tracingOn(): boolean {
  return sdk !== undefined;
}

export const tracer = () => trace.getTracer("relayctl");

/**
 * `otlp`: loads and registers the SDK under `serviceName`; `off`: nothing at all.
 * The SDK is required here, not imported at the top, so it is never loaded when off.
 */
export function startTracing(mode: "off" | "otlp", serviceName: string, version: string): void {
  if (mode !== "otlp" || sdk) return;
  const { startSdk } = require("./sdk.js") as typeof import("./sdk.js");
  sdk = startSdk(serviceName, version);
}

/** A stop never waits on an unreachable collector longer than this. */
const SHUTDOWN_MS = 2000;

/** Exports the spans still batched (call before exit), for at most SHUTDOWN_MS. */
export async function stopTracing(): Promise<void> {
  if (!sdk) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, SHUTDOWN_MS);
  });
  await Promise.race([sdk.shutdown().catch(() => {}), late]);
  clearTimeout(timer);
  sdk = undefined;
}

/** OpenTelemetry packages in require.cache: the proof that "off" loaded no SDK. */
export function loadedOtelPackages(): string[] {
  const names = new Set<string>();
  for (const path of Object.keys(require.cache)) {
    const m = /[\\/]node_modules[\\/]@opentelemetry[\\/]([^\\/]+)/.exec(path);
    if (m) names.add(`@opentelemetry/${m[1]}`);
  }
  return [...names].sort();
}

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
  if (sdk) propagation.inject(context.active(), carrier);
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
  if (!sdk) return fn(undefined);
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

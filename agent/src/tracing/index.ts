// Tracing for the agent: each job runs in a span that is a child of the
// gateway's (the Job carries its W3C trace context: the stream is long-lived, so
// gRPC metadata cannot name a job), and the command inside it in a span of its
// own. Off by default, and then free: no SDK is loaded and every helper returns
// after one boolean check. Turning the SDK on and off is @relayctl/tracing's, which
// the control plane shares.
import { type Span, SpanKind, SpanStatusCode, context, propagation, trace } from "@opentelemetry/api";
import type { Job } from "@relayctl/proto";
import { loadedOtelPackages, startTracing as startSdk, tracingOn } from "@relayctl/tracing";
import type { Logger } from "../log.js";

export { stopTracing } from "@relayctl/tracing";

export const SERVICE_NAME = "relayctl-agent";

/** `otlp`: loads and registers the SDK; `off`: nothing (the SDK is required lazily, never loaded). */
export function startTracing(mode: "off" | "otlp", version: string): void {
  startSdk(mode, SERVICE_NAME, version);
}

/** One debug line: whether tracing is on and which OTel packages require.cache holds. */
export function logTracingState(log: Logger): void {
  log.debug(
    { tracing: tracingOn() ? "otlp" : "off", service_name: SERVICE_NAME, otel_modules: loadedOtelPackages() },
    "tracing",
  );
}

async function inSpan<T>(span: Span, fn: (span: Span) => Promise<T>): Promise<T> {
  try {
    return await context.with(trace.setSpan(context.active(), span), () => fn(span));
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
    throw err;
  } finally {
    span.end();
  }
}

/** Runs a job in a CONSUMER span, child of the span named by the job's trace context. */
export function traceJob<T>(job: Job, fn: () => Promise<T>): Promise<T> {
  if (!tracingOn()) return fn();
  const parent = propagation.extract(context.active(), job.traceContext);
  const span = trace
    .getTracer("relayctl")
    .startSpan(
      `job ${job.kind?.$case ?? "unknown"}`,
      { kind: SpanKind.CONSUMER, attributes: { "relayctl.operation_id": job.operationId } },
      parent,
    );
  return inSpan(span, fn);
}

/** Runs a command (inside a job's span) in a span of its own; its outcome becomes attributes. */
export function traceCommand<T extends { status: string; exitCode: number }>(
  fn: () => Promise<T>,
): Promise<T> {
  if (!tracingOn()) return fn();
  const span = trace.getTracer("relayctl").startSpan("command run", { kind: SpanKind.INTERNAL });
  return inSpan(span, async (s) => {
    const outcome = await fn();
    s.setAttributes({ "relayctl.status": outcome.status, "process.exit.code": outcome.exitCode });
    if (outcome.status !== "completed") s.setStatus({ code: SpanStatusCode.ERROR, message: outcome.status });
    return outcome;
  });
}

// The OpenTelemetry SDK of the agent and the control plane, loaded only when tracing is on
// (index.ts requires this file lazily): with tracing off no SDK module is ever loaded and
// the API stays the no-op it is by default. Spans go out in batches over OTLP/HTTP to the
// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT; OTEL_BSP_* tune the batches.
// SDK 3.x has no NodeTracerProvider.register(): the context manager (AsyncLocalStorage),
// the W3C propagators and the provider are set on the API here, as register() did.
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, type BatchSpanProcessorOptions, TracerProvider } from "@opentelemetry/sdk-trace";
import { z } from "zod";

export interface Sdk {
  /** Exports what is still batched, then stops. */
  shutdown(): Promise<void>;
}

/** A standard OTEL_* number: unset or empty is its default, and so is a bad value (the spec's rule). */
const otelNumber = (fallback: number, min: number) =>
  z
    .preprocess((v) => (v === "" ? undefined : v), z.coerce.number().int().min(min).default(fallback))
    .catch(fallback);

/**
 * The batch processor's standard variables, which SDK 3.x no longer reads itself (its
 * processors take options only). Parsed once, when tracing starts; defaults are the spec's.
 */
const BatchEnv = z.object({
  /** Milliseconds between two exports. @default 5000 */
  OTEL_BSP_SCHEDULE_DELAY: otelNumber(5000, 0),
  /** Milliseconds an export may take before it is given up. @default 30000 */
  OTEL_BSP_EXPORT_TIMEOUT: otelNumber(30000, 0),
  /** Spans waiting for export at most; more are dropped. @default 2048 */
  OTEL_BSP_MAX_QUEUE_SIZE: otelNumber(2048, 1),
  /** Spans in one export at most. @default 512 */
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: otelNumber(512, 1),
});

/** The batch processor's options from OTEL_BSP_* (exported for its unit test). */
export function batchOptions(environment: NodeJS.ProcessEnv): Omit<BatchSpanProcessorOptions, "exporter"> {
  const env = BatchEnv.parse(environment);
  return {
    scheduledDelayMillis: env.OTEL_BSP_SCHEDULE_DELAY,
    exportTimeoutMillis: env.OTEL_BSP_EXPORT_TIMEOUT,
    maxQueueSize: env.OTEL_BSP_MAX_QUEUE_SIZE,
    maxExportBatchSize: env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
  };
}

/** Registers a global tracer provider (and the W3C trace-context and baggage propagators). */
export function startSdk(serviceName: string, version: string): Sdk {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      "service.name": process.env.OTEL_SERVICE_NAME || serviceName,
      "service.version": version,
      "process.pid": process.pid,
    }),
    spanProcessors: [
      new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...batchOptions(process.env) }),
    ],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  trace.setGlobalTracerProvider(provider);
  return {
    shutdown: async () => {
      await provider.shutdown();
      contextManager.disable();
    },
  };
}

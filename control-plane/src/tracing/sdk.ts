// The OpenTelemetry SDK, loaded only when tracing is on (index.ts requires this
// file lazily): with tracing off no SDK module is ever loaded and the API stays
// the no-op it is by default. Spans go out in batches over OTLP/HTTP to the
// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT; OTEL_BSP_* tune the batches.
// Twin of agent/src/tracing/sdk.ts: the agent and the control plane share no runtime package.
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

export interface Sdk {
  /** Exports what is still batched, then stops. */
  shutdown(): Promise<void>;
}

/** Registers a global tracer provider (and the W3C trace-context propagator). */
export function startSdk(serviceName: string, version: string): Sdk {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      "service.name": process.env.OTEL_SERVICE_NAME || serviceName,
      "service.version": version,
      "process.pid": process.pid,
    }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  provider.register();
  return { shutdown: () => provider.shutdown() };
}

// A local OTLP/HTTP trace receiver standing in for an OpenTelemetry collector: it takes
// POST /v1/traces in OTLP/JSON (what @opentelemetry/exporter-trace-otlp-http sends; gzip
// too) and keeps every span, flattened. OTLP/protobuf is answered 415, which the OTLP spec
// allows a receiver that does not support an encoding.
import { createServer } from "node:http";
import { gunzipSync } from "node:zlib";
import { onCleanup } from "./cleanup";
import { listenOnFreePort } from "./ports";

export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received, whatever they held. */
  requests: number;
  stop(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: {
      spans?: {
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpKeyValue[];
      }[];
    }[];
  }[];
}

function attributes(kvs: OtlpKeyValue[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of kvs) {
    out[key] = value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue);
  }
  return out;
}

function flatten(req: OtlpRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const service = String(attributes(rs.resource?.attributes)["service.name"] ?? "");
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver = { url: "", spans: [] as ReceivedSpan[], requests: 0, stop: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      receiver.requests++;
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      if (!String(req.headers["content-type"]).startsWith("application/json")) {
        res.writeHead(415).end();
        return;
      }
      try {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        receiver.spans.push(...flatten(JSON.parse(body.toString("utf8")) as OtlpRequest));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  receiver.url = `http://127.0.0.1:${await listenOnFreePort(server)}`;
  receiver.stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(receiver.stop);
  return receiver;
}

// Trace context over NATS: the W3C `traceparent` travels in the message headers.
// The api side wraps a job's request in a PRODUCER span; the gateway side runs
// the job's handler in a CONSUMER span, child of it, with the job's request id.
import { SpanKind } from "@opentelemetry/api";
import { type MsgHdrs, headers as natsHeaders } from "nats";
import { activeTraceContext, contextFrom, inSpan, tracingOn } from "./index.js";
import { withRequestId } from "./request-id.js";

// The subject template, not the subject: span names stay few (the server id is an attribute).
const JOB_SUBJECT = "relayctl.v1.agent.{server_id}.job";

const attributes = (subject: string, operationId: string) => ({
  "messaging.system": "nats",
  "messaging.destination.name": subject,
  "relayctl.operation_id": operationId,
});

/** Publishes through `send` in a PRODUCER span whose context rides in the headers. */
export function tracedJobRequest<T>(
  subject: string,
  operationId: string,
  send: (headers: MsgHdrs | undefined) => Promise<T>,
): Promise<T> {
  if (!tracingOn()) return send(undefined);
  return inSpan(
    `publish ${JOB_SUBJECT}`,
    { kind: SpanKind.PRODUCER, attributes: attributes(subject, operationId) },
    () => {
      const h = natsHeaders();
      for (const [k, v] of Object.entries(activeTraceContext())) h.set(k, v);
      return send(h);
    },
  );
}

/** Runs a received job's handler in a CONSUMER span (child of the publisher's) and its request's id. */
export function tracedJobHandling<T>(
  subject: string,
  job: { operationId: string; requestId: string },
  msgHeaders: MsgHdrs | undefined,
  handle: () => Promise<T>,
): Promise<T> {
  return withRequestId(job.requestId || undefined, () => {
    if (!tracingOn()) return handle();
    const carrier: Record<string, string> = {};
    for (const k of msgHeaders?.keys() ?? []) carrier[k.toLowerCase()] = msgHeaders!.get(k);
    return inSpan(
      `process ${JOB_SUBJECT}`,
      { kind: SpanKind.CONSUMER, attributes: attributes(subject, job.operationId) },
      () => handle(),
      contextFrom(carrier),
    );
  });
}

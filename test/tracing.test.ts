// Tracing and request ids across processes: api, gateway and agent run apart and export
// spans over OTLP/HTTP to a local receiver (standing in for a collector); one exec must make
// ONE trace from the API request to the agent's run of the command, with the right parents.
import { randomBytes, randomUUID } from "node:crypto";
import test from "ava";
import { UUID, assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api } from "./harness/http";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./harness/otlp-receiver";
import { pollUntil } from "./harness/wait";

const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;
const INTERNAL = 1;

let otlp: OtlpReceiver;
let c: Cluster;
/** A receiver the untraced cluster is pointed at, and that cluster (tracing not turned on). */
let idle: OtlpReceiver;
let off: Cluster;

/** Short batches so spans reach the receiver within a moment of ending. */
const otelEnv = (receiver: OtlpReceiver) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  OTEL_BSP_SCHEDULE_DELAY: "100",
});

test.before(async () => {
  [otlp, idle] = await Promise.all([startOtlpReceiver(), startOtlpReceiver()]);
  [c, off] = await Promise.all([
    startCluster({
      serverEnv: { RELAYCTL_TRACING: "otlp", ...otelEnv(otlp) },
      agentEnv: { RELAYCTL_AGENT_TRACING: "otlp", ...otelEnv(otlp) },
    }),
    // The exporter's endpoint is set, but tracing is not turned on.
    startCluster({ serverEnv: otelEnv(idle), agentEnv: otelEnv(idle) }),
  ]);
});
test.after.always(cleanupAll);

/** The JSON log lines of a process's log text. */
function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return {};
      }
    });
}

/** The otel_modules of a process's "tracing" debug line. */
function otelModules(text: string): string[] {
  const line = jsonLines(text).find((l) => l.msg === "tracing");
  if (!line) throw new Error('no "tracing" log line');
  return line.otel_modules as string[];
}

/**
 * The round trip that writes the operation's row: its own INSERT, or, when the gateway guessed the
 * audit chain's head (audit/group-commit.ts), one multi-statement that moves the head first and
 * is named by it.
 */
const writesOperation = (s: ReceivedSpan) =>
  s.kind === CLIENT && /insert into `operations`/i.test(String(s.attributes["db.query.text"] ?? ""));

function one(spans: ReceivedSpan[], what: string, match: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(match);
  if (found.length !== 1) throw new Error(`${what}: ${found.length} spans`);
  return found[0]!;
}

// Serial: this test's exec must be the only audited write of its group-commit batch. When the
// request-id tests' execs share the batch, the INSERT spans can land in another request's trace
// (seen in 1 run of 3 on Node 24 with OpenTelemetry 3.x): a known gap of group-commit tracing,
// left for a fix of its own, not something this test should race on.
test.serial(
  "tracing - one trace covers the API request, the database write, the NATS publish, the gateway and the agent's command",
  async (t) => {
    // The caller's own span (a CI step): the whole trace must continue it.
    const traceId = randomBytes(16).toString("hex");
    const callerSpanId = randomBytes(8).toString("hex");
    const res = await api(c, "/exec", {
      body: { server_id: c.serverId, command: "echo traced", timeout_seconds: 30 },
      headers: { traceparent: `00-${traceId}-${callerSpanId}-01` },
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "traced\n", stderr: "" });
    const operationId = String(res.json.operation_id);

    // Each process exports on its own schedule: wait until every part has arrived.
    const expected: [string, (s: ReceivedSpan) => boolean][] = [
      ["api server", (s) => s.service === "relayctl-api" && s.kind === SERVER],
      ["gateway operation write", (s) => s.service === "relayctl-gateway" && writesOperation(s)],
      ["api producer", (s) => s.service === "relayctl-api" && s.kind === PRODUCER],
      ["gateway consumer", (s) => s.service === "relayctl-gateway" && s.kind === CONSUMER],
      ["agent consumer", (s) => s.service === "relayctl-agent" && s.kind === CONSUMER],
      ["agent command run", (s) => s.service === "relayctl-agent" && s.name === "command run"],
    ];
    let missing: string[] = [];
    const spans = await pollUntil(
      () => {
        const mine = otlp.spans.filter((s) => s.traceId === traceId);
        missing = expected.filter(([, match]) => !mine.some(match)).map(([what]) => what);
        return missing.length === 0 ? mine : undefined;
      },
      { what: "the exec's spans from api, gateway and agent", timeoutMs: 20_000, intervalMs: 100 },
    ).catch((err: Error) => {
      const seen = otlp.spans.map(
        (s) => `${s.service} ${s.kind} ${s.name} ${s.traceId === traceId ? "(this trace)" : ""}`,
      );
      throw new Error(`${err.message}; missing: ${missing.join(", ")}; received:\n${seen.join("\n")}`);
    });
    const request = one(spans, "API request", (s) => s.kind === SERVER);
    t.is(request.service, "relayctl-api");
    t.is(request.name, "POST /api/automation/v1/exec");
    t.is(request.parentSpanId, callerSpanId, "the API span continues the caller's traceparent");
    t.is(request.attributes["http.response.status_code"], 200);

    const publish = one(spans, "NATS publish", (s) => s.kind === PRODUCER);
    t.is(publish.service, "relayctl-api");
    t.is(publish.name, "publish relayctl.v1.agent.{server_id}.job");
    t.is(publish.parentSpanId, request.spanId);
    t.is(publish.attributes["messaging.system"], "nats");
    // The job with its operation's start (bus/job-start.ts): the gateway commits the start.
    t.is(publish.attributes["messaging.destination.name"], `relayctl.v1.agent.${c.serverId}.job.start`);
    t.is(publish.attributes["relayctl.operation_id"], operationId);

    const gateway = one(spans, "gateway", (s) => s.service === "relayctl-gateway" && s.kind === CONSUMER);
    t.is(gateway.parentSpanId, publish.spanId, "traceparent travelled in the NATS headers");
    t.is(gateway.name, "process relayctl.v1.agent.{server_id}.job");
    t.is(gateway.attributes["relayctl.operation_id"], operationId);

    // The operation row is written by the gateway, before the job goes on the stream, in the
    // group commit of audited writes (audit/group-commit.ts): this test's exec is alone in its
    // batch, so in the job's own context. A batch that rolls back is retried write by write
    // (and a stale guess of the chain's head the locking way), so a retried row shows as one
    // more span: every one of them is the job's child.
    const inserts = spans.filter(writesOperation);
    t.true(inserts.length >= 1, "the operation row write is traced");
    for (const insert of inserts) {
      t.is(insert.service, "relayctl-gateway");
      t.is(insert.parentSpanId, gateway.spanId);
      t.is(insert.attributes["db.system.name"], "mysql");
      t.regex(String(insert.attributes["db.query.text"]), /insert into `operations`/i);
      t.false(String(insert.attributes["db.query.text"]).includes(operationId), "SQL without its bindings");
    }

    const job = one(spans, "agent job", (s) => s.service === "relayctl-agent" && s.kind === CONSUMER);
    t.is(job.name, "job exec");
    t.is(job.parentSpanId, gateway.spanId, "trace context travelled in the Job on the stream");
    t.is(job.attributes["relayctl.operation_id"], operationId);

    const command = one(spans, "command", (s) => s.name === "command run");
    t.is(command.service, "relayctl-agent");
    t.is(command.kind, INTERNAL);
    t.is(command.parentSpanId, job.spanId);
    t.is(command.attributes["process.exit.code"], 0);

    for (const text of [c.api.logText(), c.gateway.logText(), c.agent.logText()]) {
      t.true(otelModules(text).includes("@opentelemetry/sdk-trace"), "tracing on loads the SDK");
    }
  },
);

test("request id - X-Request-Id is answered back and names the exec's log lines in the api, the gateway and the agent", async (t) => {
  const requestId = `ci-run-${randomUUID()}`;
  const res = await api(c, "/exec", {
    body: { server_id: c.serverId, command: "echo with-request-id", timeout_seconds: 30 },
    headers: { "x-request-id": requestId },
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "with-request-id\n", stderr: "" });
  t.is(res.headers.get("x-request-id"), requestId);
  const operationId = String(res.json.operation_id);

  const tagged = (text: string) => jsonLines(text).filter((l) => l.req_id === requestId);
  // The api's "request" line is written when the answer is done, the agent's after its result: poll.
  const { agentLines, gatewayLines, apiLines } = await pollUntil(
    () => {
      const found = {
        agentLines: tagged(c.agent.logText()),
        gatewayLines: tagged(c.gateway.logText()),
        apiLines: tagged(c.api.logText()),
      };
      const all =
        found.agentLines.some((l) => l.msg === "job finished") &&
        found.gatewayLines.length > 0 &&
        found.apiLines.some((l) => l.msg === "request");
      return all ? found : undefined;
    },
    { what: "log lines naming the request in api, gateway and agent", timeoutMs: 20_000, intervalMs: 100 },
  );
  t.true(agentLines.some((l) => l.msg === "job started" && l.operation_id === operationId));
  t.true(agentLines.some((l) => l.msg === "job finished" && l.operation_id === operationId));
  t.true(gatewayLines.some((l) => l.msg === "job to agent" && l.operation_id === operationId));
  t.true(apiLines.some((l) => l.msg === "request" && l.status === 200));
  // Each line names the request once: Fastify's binding and the mixin never both.
  const raw = c.api
    .logText()
    .split("\n")
    .filter((l) => l.includes(requestId));
  t.true(raw.every((l) => l.split('"req_id"').length === 2));
});

test("request id - an insane X-Request-Id is replaced by a new one, and every answer carries an id", async (t) => {
  for (const bad of ["has spaces in it", "x".repeat(200), 'quote"d']) {
    const res = await api(c, "/operations/00000000-0000-4000-8000-000000000000", {
      headers: { "x-request-id": bad },
    });
    t.is(res.status, 404);
    t.regex(res.headers.get("x-request-id") ?? "", UUID, `replaced: ${bad.slice(0, 20)}`);
  }
  const none = await api(c, "/operations/00000000-0000-4000-8000-000000000000");
  t.regex(none.headers.get("x-request-id") ?? "", UUID);
});

test("tracing - off by default: no OTel SDK module is loaded and nothing is exported", async (t) => {
  const res = await api(off, "/exec", {
    body: { server_id: off.serverId, command: "echo untraced", timeout_seconds: 30 },
    headers: { traceparent: `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01` },
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "untraced\n", stderr: "" });
  for (const text of [off.api.logText(), off.gateway.logText(), off.agent.logText()]) {
    t.deepEqual(otelModules(text), ["@opentelemetry/api"], "only the no-op API is loaded");
  }
  // A clean stop flushes every exporter there is: after it, anything exported has arrived.
  await off.stop();
  t.is(idle.requests, 0);
});

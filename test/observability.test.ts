// Metrics and readiness on a real cluster (api and gateway processes, NATS of
// its own, MariaDB, one agent): /metrics of both roles moves with an exec and a
// refusal, stays free of ids and keys, needs its token when one is set; /readyz
// turns 503 naming NATS while it is down, and 200 once it is back.
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, api, exec, request } from "./harness/http";
import { pollUntil, waitForMinuteRoom } from "./harness/wait";

const METRICS_TOKEN = "scrape-token-for-tests-0123456789";

let c: Cluster;

test.before(async () => {
  c = await startCluster({ ownNats: true, serverEnv: { RELAYCTL_METRICS_TOKEN: METRICS_TOKEN } });
});

test.after.always(async () => {
  await c?.stop();
  await cleanupAll();
});

/** One sample of Prometheus' text format. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `labels`. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

async function scrape(baseUrl: string): Promise<{ text: string; samples: Sample[] }> {
  const res = await request({ baseUrl }, "/metrics", { key: METRICS_TOKEN });
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/metrics: ${res.status} ${res.text}`);
  return { text: res.text, samples: parse(res.text) };
}

const roles = () => [
  { role: "api", url: c.api.apiUrl },
  { role: "gateway", url: c.gateway.metricsUrl },
];

test.serial(
  "metrics - /metrics on both roles counts an exec, the connected agent and a rate-limit refusal",
  async (t) => {
    const before = { api: await scrape(c.api.apiUrl), gateway: await scrape(c.gateway.metricsUrl) };
    const runId = `obs-${randomUUID()}`;
    const ok = await exec(c, {
      server_id: c.serverId,
      command: "echo hi",
      run_id: runId,
      timeout_seconds: 30,
    });
    assertCompleted(t, ok, { exit_code: 0, stdout: "hi\n" });
    const failing = await exec(c, { server_id: c.serverId, command: "exit 3", timeout_seconds: 30 });
    assertCompleted(t, failing, { exit_code: 3, stdout: "" });
    const opRead = await api(c, `/operations/${String(ok.json.operation_id)}`);
    t.is(opRead.status, 200);

    // A refusal: a key limited to one request a minute, used twice in the same minute.
    const limited = await c.createKey(["--rate-limit", "1"]);
    await waitForMinuteRoom(10_000);
    const unknownOp = `/operations/${randomUUID()}`;
    t.is((await api(c, unknownOp, { key: limited.key })).status, 404);
    t.is((await api(c, unknownOp, { key: limited.key })).status, 429);

    // Caller-chosen URLs (ids, a query, an unknown path) make no series of their own.
    t.is((await api(c, `/operations/${randomUUID()}?token=rca_not_a_key`)).status, 404);
    t.is((await request(c, `/no-such-route/rca_${randomUUID()}`, { key: null })).status, 404);

    const apiNow = await scrape(c.api.apiUrl);
    const delta = (name: string, labels: Record<string, string> = {}) =>
      value(apiNow.samples, name, labels) - value(before.api.samples, name, labels);
    t.is(delta("relayctl_operations_started_total", { type: "exec" }), 2);
    // Exec waits for its completion: its job is sent, answered only if refused (JobBus.send).
    t.is(delta("relayctl_operation_dispatch_seconds_count", { outcome: "sent" }), 2);
    t.is(
      delta("relayctl_http_request_duration_seconds_count", {
        method: "POST",
        route: "/api/automation/v1/exec",
        status: "200",
      }),
      2,
    );
    // The route pattern, never the raw URL: the operation id makes no series of its own.
    t.is(
      delta("relayctl_http_request_duration_seconds_count", {
        route: "/api/automation/v1/operations/:operation_id",
        status: "429",
      }),
      1,
    );
    t.is(
      delta("relayctl_rate_limit_refusals_total", { route: "/api/automation/v1/operations/:operation_id" }),
      1,
    );
    t.is(delta("relayctl_http_request_duration_seconds_count", { route: "unmatched", status: "404" }), 1);
    t.true(value(apiNow.samples, "relayctl_process_resident_memory_bytes") > 0, "default process metrics");

    // The agent's results end their operations on the gateway: the final states are counted there.
    const gatewayNow = await scrape(c.gateway.metricsUrl);
    const gDelta = (name: string, labels: Record<string, string>) =>
      value(gatewayNow.samples, name, labels) - value(before.gateway.samples, name, labels);
    t.is(gDelta("relayctl_operations_total", { type: "exec", status: "completed" }), 2);
    t.is(gDelta("relayctl_operation_duration_seconds_count", { type: "exec", status: "completed" }), 2);
    t.is(gDelta("relayctl_operation_completion_seconds_count", {}), 2);
    t.is(value(gatewayNow.samples, "relayctl_gateway_agents_connected"), 1);
    // Its one agent was welcomed: no handshake under way or waiting, none given up on.
    const handshakes = gatewayNow.samples.filter((s) => s.name.startsWith("relayctl_gateway_handshakes"));
    t.deepEqual(
      handshakes.map((s) => [s.name, s.labels.state, s.value]).sort(),
      [
        ["relayctl_gateway_handshakes", "in_progress", 0],
        ["relayctl_gateway_handshakes", "waiting", 0],
        ["relayctl_gateway_handshakes_abandoned_total", undefined, 0],
      ].sort(),
    );

    // Nothing secret or caller-chosen reaches a scrape.
    for (const { role, text } of [
      { role: "api", text: apiNow.text },
      { role: "gateway", text: gatewayNow.text },
    ]) {
      for (const secret of [
        c.key,
        limited.key,
        c.serverId,
        String(ok.json.operation_id),
        runId,
        METRICS_TOKEN,
      ])
        t.false(text.includes(secret), `${role} /metrics must not contain ${secret.slice(0, 8)}…`);
      t.notRegex(text, /rc[akod]_/, `${role} /metrics must carry no credential`);
    }
  },
);

test.serial("metrics - /metrics needs the scrape token when RELAYCTL_METRICS_TOKEN is set", async (t) => {
  for (const { role, url } of roles()) {
    for (const key of [null, "wrong-token-wrong-token-wrong-tok", c.key]) {
      const res = await request({ baseUrl: url }, "/metrics", { key });
      t.is(res.status, 401, `${role} /metrics with ${key ? "a wrong" : "no"} token`);
      t.deepEqual(Object.keys(res.json), ["detail"]);
    }
    t.is((await request({ baseUrl: url }, "/metrics", { key: METRICS_TOKEN })).status, 200);
  }
});

test.serial(
  "health - /readyz turns 503 naming NATS while it is down, and 200 once it is back; /healthz stays 200",
  async (t) => {
    for (const { role, url } of roles()) {
      const ready = await request({ baseUrl: url }, "/readyz", { key: null });
      t.is(ready.status, 200, `${role} ready`);
      t.deepEqual(ready.json, { status: "ok", checks: { database: "ok", bus: "ok" } });
    }
    await c.nats.stop("SIGKILL");
    for (const { role, url } of roles()) {
      const down = await pollUntil(
        async () => {
          const res = await request({ baseUrl: url }, "/readyz", { key: null });
          return res.status === 503 ? res : undefined;
        },
        { what: `${role} /readyz to answer 503 with NATS down`, timeoutMs: 20_000, intervalMs: 200 },
      );
      t.deepEqual(down.json, { detail: "not ready: nats unreachable" });
      t.is((await request({ baseUrl: url }, "/healthz", { key: null })).status, 200, `${role} still alive`);
      const { samples } = await scrape(url);
      t.true(
        value(samples, "relayctl_nats_errors_total", { kind: "disconnect" }) >= 1,
        `${role} counted the disconnect`,
      );
    }
    await c.nats.restart();
    for (const { role, url } of roles()) {
      const back: ApiResponse = await pollUntil(
        async () => {
          const res = await request({ baseUrl: url }, "/readyz", { key: null });
          return res.status === 200 ? res : undefined;
        },
        { what: `${role} /readyz to answer 200 with NATS back`, timeoutMs: 30_000, intervalMs: 200 },
      );
      t.deepEqual(back.json, { status: "ok", checks: { database: "ok", bus: "ok" } });
    }
  },
);

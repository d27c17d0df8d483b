// The api's validation and error shapes through Fastify's inject(), on the
// SQLite store and the in-process bus (no cluster needed, so they are fast),
// and the transport limits on a real socket. Details asserted here are the
// wording users and tests depend on: "<field>: <what is wrong>".
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import anyTest, { type TestFn } from "ava";
import type { FastifyInstance } from "fastify";
import { MemoryBus } from "../bus/memory-bus.js";
import { AdminError, createApiKey, createAutomationKey, createTenant } from "../cli/admin.js";
import { loadConfig } from "../config.js";
import { type Db, migrate, openDb } from "../db/knex.js";
import { createLogger } from "../lib/logger.js";
import { buildApi } from "./app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { OperationService } from "../operations/service.js";
import { DeployService } from "../deployments/service.js";
import { waitForMinuteRoom } from "@relayctl/devkit";

const test = anyTest as TestFn<{
  app: FastifyInstance;
  db: Db;
  dir: string;
  key: string;
  apiKey: string;
  /** The app on a real socket, for the transport limits. */
  port: number;
}>;

const UNKNOWN_SERVER = "00000000-0000-4000-8000-000000000000";

test.before(async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-app-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  await migrate(db);
  const config = loadConfig({
    RELAYCTL_DATABASE_URL: url,
    RELAYCTL_BUS: "memory",
    RELAYCTL_HTTP_REQUEST_TIMEOUT_MS: "1500",
    RELAYCTL_HTTP_HEADERS_TIMEOUT_MS: "1000",
  });
  const bus = new MemoryBus();
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const app = await buildApi({ config, db, bus, ops, deploys }, log, () => []);
  const tenant = await createTenant(db, "inject");
  const { key } = await createAutomationKey(db, { tenant: tenant.tenant_id, name: "ci", rateLimit: 1000 });
  const apiKey = (await createApiKey(db, { tenant: tenant.tenant_id, name: "mgmt" })).key;
  const port = Number(new URL(await app.listen({ host: "127.0.0.1", port: 0 })).port);
  t.context = { app, db, dir, key, apiKey, port };
});

test.after.always(async (t) => {
  await t.context.app?.close();
  await t.context.db?.destroy();
  if (t.context.dir) rmSync(t.context.dir, { recursive: true, force: true });
});

async function exec(t: { context: { app: FastifyInstance; key: string } }, body: unknown) {
  const res = await t.context.app.inject({
    method: "POST",
    url: "/api/automation/v1/exec",
    headers: { authorization: `Bearer ${t.context.key}` },
    payload: body as Record<string, unknown>,
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

const base = { server_id: UNKNOWN_SERVER, command: "true" };
const envOf = (n: number, pad = 0) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`K${i}`, i === 0 ? "v".repeat(pad) : "v"]));

const refused: [string, unknown, string][] = [
  ["missing command", { server_id: UNKNOWN_SERVER }, "command: is required"],
  ["missing server_id", { command: "true" }, "server_id: is required"],
  ["unknown field", { ...base, shell: "bash" }, "shell: is not a known field"],
  ["command not a string", { ...base, command: ["echo"] }, "command: must be string"],
  ["command of 8,193", { ...base, command: "x".repeat(8193) }, "command: must be at most 8192 characters"],
  ["empty command", { ...base, command: "" }, "command: must be at least 1 characters"],
  ["server_id not a UUID", { ...base, server_id: "not-a-uuid" }, "server_id: must be a UUID"],
  ["timeout 0", { ...base, timeout_seconds: 0 }, "timeout_seconds: must be >= 1"],
  ["timeout 901", { ...base, timeout_seconds: 901 }, "timeout_seconds: must be <= 900"],
  ["timeout 1.5", { ...base, timeout_seconds: 1.5 }, "timeout_seconds: must be integer"],
  ["timeout -1", { ...base, timeout_seconds: -1 }, "timeout_seconds: must be >= 1"],
  ["server_id 1234", { ...base, server_id: "1234" }, "server_id: must be a UUID"],
  ["server_id a number", { ...base, server_id: 42 }, "server_id: must be string"],
  ["working_directory a number", { ...base, working_directory: 7 }, "working_directory: must be string"],
  ["timeout as a string", { ...base, timeout_seconds: "10" }, "timeout_seconds: must be number"],
  ["timeout null", { ...base, timeout_seconds: null }, "timeout_seconds: must be number"],
  ["env value a number", { ...base, env: { PORT: 8080 } }, "env.PORT: must be string"],
  ["env an array", { ...base, env: ["A=1"] }, "env: must be object"],
  ["env of 201 keys", { ...base, env: envOf(201) }, "env: must have at most 200 keys"],
  ["env key not a name", { ...base, env: { "A-B": "1" } }, "env.A-B: is not an allowed key"],
  ["run_context value a number", { ...base, run_context: { sha: 1 } }, "run_context.sha: must be string"],
];

for (const [what, body, detail] of refused) {
  test(`validation - exec ${what} is 422 "${detail}"`, async (t) => {
    t.deepEqual(await exec(t, body), { status: 422, body: { detail } });
  });
}

test("validation - env over 64 KB is 422 with its size; exactly 64 KB passes validation", async (t) => {
  // 2 keys "K0","K1" + values: 4 bytes of keys, "v" for K1, the rest in K0
  const over = envOf(2, 65536 - 4 - 1 + 1);
  t.deepEqual(await exec(t, { ...base, env: over }), {
    status: 422,
    body: { detail: "env: total size 65537 bytes exceeds 65536 bytes" },
  });
  const exact = envOf(2, 65536 - 4 - 1);
  // valid: it goes on to the server lookup
  t.deepEqual(await exec(t, { ...base, env: exact }), {
    status: 404,
    body: { detail: `server '${UNKNOWN_SERVER}' not found` },
  });
});

test("validation - the limits' bounds pass validation (command 8,192, env 200 keys, timeout 1 and 900)", async (t) => {
  for (const body of [
    { ...base, command: "x".repeat(8192) },
    { ...base, env: envOf(200) },
    { ...base, timeout_seconds: 1 },
    { ...base, timeout_seconds: 900 },
    { ...base, run_context: { provider: "github", extra: "kept" } },
  ]) {
    t.is((await exec(t, body)).status, 404);
  }
});

test("errors - bad JSON is 400, a non-JSON body 415, both {detail} only", async (t) => {
  const headers = { authorization: `Bearer ${t.context.key}` };
  const url = "/api/automation/v1/exec";
  const bad = await t.context.app.inject({
    method: "POST",
    url,
    headers: { ...headers, "content-type": "application/json" },
    payload: "{nope",
  });
  t.is(bad.statusCode, 400);
  t.deepEqual(Object.keys(bad.json()), ["detail"]);
  t.regex(bad.json().detail, /not valid JSON/);
  const text = await t.context.app.inject({
    method: "POST",
    url,
    headers: { ...headers, "content-type": "text/plain" },
    payload: "echo hi",
  });
  t.deepEqual(
    [text.statusCode, text.json()],
    [415, { detail: "unsupported content type: send application/json" }],
  );
});

test("validation - the audit query coerces limit from digits and refuses the rest", async (t) => {
  const get = (qs: string) =>
    t.context.app.inject({
      method: "GET",
      url: `/api/audit?${qs}`,
      headers: { "x-api-key": t.context.apiKey },
    });
  const ok = await get("limit=2");
  t.is(ok.statusCode, 200);
  t.is(ok.json().events.length, 2);
  t.deepEqual((await get("limit=abc")).json(), { detail: "limit: must be number" });
  t.deepEqual((await get("limit=1001")).json(), { detail: "limit: must be <= 1000" });
  t.deepEqual((await get("since=yesterday")).json(), {
    detail: "since: must be an ISO 8601 date, or date-time with a time zone",
  });
  t.is((await get("since=2020-01-01")).statusCode, 200);
  t.deepEqual((await get("bogus=1")).json(), { detail: "bogus: is not a known field" });
});

test("validation - automation keys: a past expiry is 422 through the API", async (t) => {
  const res = await t.context.app.inject({
    method: "POST",
    url: "/api/automation-keys",
    headers: { "x-api-key": t.context.apiKey },
    payload: { name: "old", expires_at: "2020-01-01T00:00:00Z" },
  });
  t.deepEqual(
    [res.statusCode, res.json()],
    [422, { detail: "expires_at: '2020-01-01T00:00:00Z' is in the past" }],
  );
  const noZone = await t.context.app.inject({
    method: "POST",
    url: "/api/automation-keys",
    headers: { "x-api-key": t.context.apiKey },
    payload: { name: "old", expires_at: "2030-01-01" },
  });
  t.deepEqual(noZone.json(), { detail: "expires_at: must be an ISO 8601 date-time with a time zone" });
});

test("timeouts - a client trickling its headers is answered 408 and cut off at the headers timeout", async (t) => {
  const socket = connect(t.context.port, "127.0.0.1");
  const started = Date.now();
  let received = "";
  socket.on("data", (d) => {
    received += d.toString();
  });
  socket.on("error", () => {});
  socket.write("POST /api/agent/enroll HTTP/1.1\r\nHost: x\r\n");
  const trickle = setInterval(() => socket.write("X-Slow: a\r\n"), 200);
  const closedAfter = await new Promise<number>((resolve) =>
    socket.on("close", () => resolve(Date.now() - started)),
  );
  clearInterval(trickle);
  // headers timeout 1 s, checked every second: cut between 1 and ~2 s (+ slack for load)
  t.true(closedAfter >= 900 && closedAfter < 6000, `closed after ${closedAfter} ms`);
  t.regex(received, /^HTTP\/1\.1 408/);
});

test("timeouts - a client trickling its body is answered 408 and cut off at the request timeout", async (t) => {
  const socket = connect(t.context.port, "127.0.0.1");
  const started = Date.now();
  let received = "";
  socket.on("data", (d) => {
    received += d.toString();
  });
  socket.on("error", () => {});
  socket.write(
    "POST /api/agent/enroll HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
  );
  const trickle = setInterval(() => socket.write(" "), 200);
  const closedAfter = await new Promise<number>((resolve) =>
    socket.on("close", () => resolve(Date.now() - started)),
  );
  clearInterval(trickle);
  // request timeout 1.5 s, checked every second: cut between 1.5 and ~2.5 s (+ slack for load)
  t.true(closedAfter >= 1400 && closedAfter < 6000, `closed after ${closedAfter} ms`);
  t.regex(received, /^HTTP\/1\.1 408/);
});

async function newKey(
  t: { context: { app: FastifyInstance; apiKey: string } },
  body: Record<string, unknown>,
) {
  const res = await t.context.app.inject({
    method: "POST",
    url: "/api/automation-keys",
    headers: { "x-api-key": t.context.apiKey },
    payload: { name: `k-${Math.random().toString(36).slice(2, 8)}`, ...body },
  });
  return res.json() as { id: string; key: string };
}

async function securityEvents(db: Db, keyId: string) {
  const rows = await db("audit_events")
    .where({ key_id: keyId })
    .whereIn("event_type", ["auth.refused", "rate_limit.hit"])
    .orderBy("seq")
    .select("event_type", "payload");
  return rows.map((r) => ({ type: r.event_type as string, payload: JSON.parse(r.payload) }));
}

test.serial(
  "refusals - 150 refused requests of a key limited to 5/min: 5 refusals, 145 429s, two events",
  async (t) => {
    const { id, key } = await newKey(t, { rate_limit: 5, operations: ["deploy"] });
    await waitForMinuteRoom(20_000);
    const statuses: number[] = [];
    for (let i = 0; i < 150; i++) {
      const res = await t.context.app.inject({
        method: "POST",
        url: "/api/automation/v1/exec",
        headers: { authorization: `Bearer ${key}` },
        payload: base,
      });
      statuses.push(res.statusCode);
    }
    t.deepEqual(statuses, [...Array(5).fill(403), ...Array(145).fill(429)]);
    const events = await securityEvents(t.context.db, id);
    t.deepEqual(
      events.map((e) => e.type),
      ["auth.refused", "rate_limit.hit"],
    );
    t.like(events[0].payload, { status: 403, code: "RC_ERR_FORBIDDEN", window_seconds: 60 });
    t.like(events[1].payload, { limit: 5, count: 6, refused: 5 });
    const [row] = await t.context.db("rate_limit_counters").where({ key_id: id }).select("count", "refused");
    t.deepEqual([Number(row.count), Number(row.refused)], [150, 5]);
  },
);

test.serial("refusals - a revoked key's requests count too: 401 up to its limit, then 429", async (t) => {
  const { id, key } = await newKey(t, { rate_limit: 3 });
  await t.context.app.inject({
    method: "DELETE",
    url: `/api/automation-keys/${id}`,
    headers: { "x-api-key": t.context.apiKey },
  });
  await waitForMinuteRoom(10_000);
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const res = await t.context.app.inject({
      method: "GET",
      url: `/api/automation/v1/operations/${UNKNOWN_SERVER}`,
      headers: { authorization: `Bearer ${key}` },
    });
    statuses.push(res.statusCode);
  }
  t.deepEqual(statuses, [...Array(3).fill(401), ...Array(7).fill(429)]);
  const events = await securityEvents(t.context.db, id);
  t.deepEqual(
    events.map((e) => [e.type, e.payload.code ?? e.payload.refused]),
    [
      ["auth.refused", "RC_ERR_KEY_REVOKED"],
      ["rate_limit.hit", 3],
    ],
  );
});

test("key service - the CLI refuses a past expiry like the API, naming the flag", async (t) => {
  const tenant = await createTenant(t.context.db, "cli-expiry");
  const err = await t.throwsAsync(
    createAutomationKey(t.context.db, {
      tenant: tenant.tenant_id,
      name: "old",
      expiresAt: "2020-01-01T00:00:00Z",
    }),
  );
  t.is(err?.message, "expires_at: '2020-01-01T00:00:00Z' is in the past");
  const bad = await t.throwsAsync(
    createAutomationKey(t.context.db, { tenant: tenant.tenant_id, name: "old", expiresAt: "tomorrow" }),
    { instanceOf: AdminError },
  );
  t.is(bad?.message, "--expires-at: must be an ISO 8601 date-time with a time zone");
  t.is(
    await t.context
      .db("automation_keys")
      .where({ tenant_id: tenant.tenant_id })
      .count({ n: "*" })
      .first()
      .then((r) => Number(r?.n)),
    0,
  );
});

test("key service - API and CLI audit a created key with the same actor shape", async (t) => {
  const viaApi = await newKey(t, { rate_limit: 10 });
  const tenant = await t.context.db("automation_keys").where({ id: viaApi.id }).first("tenant_id");
  const viaCli = await createAutomationKey(t.context.db, { tenant: tenant.tenant_id, name: "cli-made" });
  const created = async (keyId: string) =>
    JSON.parse(
      (
        await t.context
          .db("audit_events")
          .where({ key_id: keyId, event_type: "automation_key.created" })
          .first("payload")
      ).payload,
    );
  const a = await created(viaApi.id);
  const c = await created(viaCli.key_id);
  t.deepEqual(Object.keys(a).sort(), Object.keys(c).sort());
  t.like(a.actor, { key_type: "api_key" });
  t.deepEqual(c.actor, { key_type: "operator_cli" });
  t.deepEqual(Object.keys(a.scope).sort(), Object.keys(c.scope).sort());
});

// Regular API keys (X-API-Key: rck_...) and what they manage: automation keys through
// /api/automation-keys, the audit trail through /api/audit, plus the run listing of the
// Automation API (GET /operations?run_id=...).
import { createHash, randomUUID } from "node:crypto";
import { join } from "node:path";
import test from "ava";
import { waitForMinuteRoom } from "./harness/wait";
import { type Enrollment, enroll } from "./harness/agent";
import { ISO_UTC, UUID, assertCompleted, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type RequestOptions, api, exec, request } from "./harness/http";

let c: Cluster;
let apiKey: string;
let apiKeyId: string;
/** A second tenant with its own API key and server, to prove nothing crosses over. */
let other: { tenantId: string; apiKey: string; server: Enrollment };

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const uniq = (p: string) => `${p}-${Math.random().toString(36).slice(2, 8)}`;

/** Calls the management API with an X-API-Key (and no bearer). */
function mgmt(path: string, opts: RequestOptions & { apiKey?: string | null } = {}) {
  const key = opts.apiKey === undefined ? apiKey : opts.apiKey;
  const headers = { ...opts.headers, ...(key === null ? {} : { "x-api-key": key }) };
  return request(c, `/api${path}`, { ...opts, key: null, headers });
}

async function newApiKey(tenant: string) {
  const out = await c.admin(["create-api-key", "--tenant", tenant, "--name", uniq("ci")]);
  return { key: String(out.key), keyId: String(out.key_id) };
}

test.before(async () => {
  c = await startCluster();
  ({ key: apiKey, keyId: apiKeyId } = await newApiKey(c.tenantId));
  const tenant = await c.admin(["create-tenant", "--name", uniq("other")]);
  const tenantId = String(tenant.tenant_id);
  const token = await c.admin(["create-join-token", "--tenant", tenantId, "--server-name", "elsewhere"]);
  const server = await enroll(c.baseUrl, String(token.join_token), join(c.dir, "agent-other"));
  other = { tenantId, apiKey: (await newApiKey(tenantId)).key, server };
});
test.after.always(cleanupAll);

test.serial(
  "api keys - create-api-key prints key_id and an rck_ key stored only as its SHA-256",
  async (t) => {
    t.regex(apiKeyId, UUID);
    t.regex(apiKey, /^rck_[0-9A-Za-z]{40}$/);
    const rows = await c.db.query("SELECT * FROM api_keys WHERE id = ?", [apiKeyId]);
    t.is(rows.length, 1);
    t.is(rows[0].token_hash, sha256(apiKey));
    t.false(JSON.stringify(rows).includes(apiKey));
  },
);

test.serial("api keys - a missing, unknown or rca_ X-API-Key is 401", async (t) => {
  assertDetailOnly(t, await mgmt("/automation-keys", { apiKey: null }), 401);
  assertDetailOnly(t, await mgmt("/automation-keys", { apiKey: `rck_${"A1b2C3d4".repeat(5)}` }), 401);
  assertDetailOnly(t, await mgmt("/automation-keys", { apiKey: c.key }), 401);
  // and an API key is not an automation key
  assertDetailOnly(t, await api(c, "/operations/00000000-0000-4000-8000-000000000000", { key: apiKey }), 401);
});

test.serial("api keys - a revoked API key is 401 on its next request", async (t) => {
  const { key, keyId } = await newApiKey(c.tenantId);
  t.is((await mgmt("/automation-keys", { apiKey: key })).status, 200);
  const out = await c.admin(["revoke-api-key", "--key-id", keyId]);
  t.is(out.key_id, keyId);
  t.regex(String(out.revoked_at), ISO_UTC);
  t.regex(assertDetailOnly(t, await mgmt("/automation-keys", { apiKey: key }), 401), /revoked/);
  const events = await c.db.query(
    "SELECT event_type, payload FROM audit_events WHERE key_id = ? ORDER BY seq",
    [keyId],
  );
  t.deepEqual(
    events.map((e) => e.event_type),
    ["api_key.created", "api_key.revoked", "auth.refused"],
  );
  t.like(JSON.parse(String(events[2].payload)), { status: 401, ip: "127.0.0.1", actor: { key_id: keyId } });
});

test.serial(
  "automation keys - create shows the secret once; the key works; list has no secrets",
  async (t) => {
    const res = await mgmt("/automation-keys", {
      body: { name: "deploy-bot", servers: [c.serverId], operations: ["exec"], ip_allowlist: ["127.0.0.1"] },
    });
    t.is(res.status, 201, describe(res));
    const key = String(res.json.key);
    t.regex(key, /^rca_[0-9A-Za-z]{40}$/);
    t.like(res.json, {
      name: "deploy-bot",
      servers: [c.serverId],
      operations: ["exec"],
      allowed_credential_ids: [],
      ip_allowlist: ["127.0.0.1"],
      rate_limit: 100,
      expires_at: null,
    });
    t.regex(String(res.json.id), UUID);
    t.regex(String(res.json.created_at), ISO_UTC);
    assertCompleted(
      t,
      await exec(c, { server_id: c.serverId, command: "echo scoped", timeout_seconds: 30 }, key),
      {
        exit_code: 0,
        stdout: "scoped\n",
      },
    );
    const list = await mgmt("/automation-keys");
    t.is(list.status, 200, describe(list));
    t.false(list.text.includes(key));
    t.false(list.text.includes(sha256(key)));
    t.notRegex(list.text, /token|hash|"key"/);
    const listed = (list.json.automation_keys as Record<string, unknown>[]).find((k) => k.id === res.json.id);
    const { key: _secret, ...withoutSecret } = res.json;
    // The list says when a key was last used (issue 31): by the exec above.
    const { last_used_at: lastUsed, ...scope } = listed ?? {};
    t.deepEqual(scope, withoutSecret);
    t.regex(String(lastUsed), ISO_UTC);
    // the other tenant sees none of them
    const theirs = await mgmt("/automation-keys", { apiKey: other.apiKey });
    t.deepEqual(theirs.json.automation_keys, []);
  },
);

test.serial("automation keys - create with rate_limit and expires_at keeps them", async (t) => {
  const expires = new Date(Date.now() + 86_400_000).toISOString();
  const res = await mgmt("/automation-keys", {
    body: { name: "short", rate_limit: 1000, expires_at: expires },
  });
  t.is(res.status, 201, describe(res));
  t.is(res.json.rate_limit, 1000);
  t.is(res.json.expires_at, expires);
});

const badBodies: [string, Record<string, unknown>, RegExp][] = [
  ["missing name", {}, /name/],
  ["unknown operation", { name: "x", operations: ["exec", "nuke"] }, /operations/],
  ["rate_limit 0", { name: "x", rate_limit: 0 }, /rate_limit/],
  ["rate_limit 1001", { name: "x", rate_limit: 1001 }, /rate_limit/],
  ["rate_limit as a string", { name: "x", rate_limit: "5" }, /rate_limit/],
  ["server id that is not a uuid", { name: "x", servers: ["web-1"] }, /servers/],
  ["unknown server", { name: "x", servers: ["00000000-0000-4000-8000-000000000000"] }, /servers: '0{8}-/],
  ["bad CIDR", { name: "x", ip_allowlist: ["10.0.0.0/8", "10.0.0.0/33"] }, /ip_allowlist: '10\.0\.0\.0\/33'/],
  [
    "host name in allowlist",
    { name: "x", ip_allowlist: ["ci.example.com"] },
    /ip_allowlist: 'ci\.example\.com'/,
  ],
  ["expires_at not a date", { name: "x", expires_at: "tomorrow" }, /expires_at/],
  ["expires_at in the past", { name: "x", expires_at: "2020-01-01T00:00:00Z" }, /expires_at.*past/],
  ["unknown credential", { name: "x", allowed_credential_ids: [randomUUID()] }, /allowed_credential_ids/],
  ["unknown field", { name: "x", scopes: [] }, /scopes/],
];
for (const [what, body, detail] of badBodies) {
  test.serial(`automation keys - create with ${what} is 422 naming the field`, async (t) => {
    t.regex(assertDetailOnly(t, await mgmt("/automation-keys", { body }), 422), detail);
  });
}

test.serial("automation keys - a server of another tenant is 422", async (t) => {
  const res = await mgmt("/automation-keys", { body: { name: "x", servers: [other.server.server_id] } });
  t.regex(assertDetailOnly(t, res, 422), new RegExp(`servers: '${other.server.server_id}'`));
});

test.serial("automation keys - PATCH changes the scope, which applies at once", async (t) => {
  const created = await mgmt("/automation-keys", { body: { name: "patchme" } });
  const id = String(created.json.id);
  const key = String(created.json.key);
  const echo = { server_id: c.serverId, command: "echo p", timeout_seconds: 30 };
  t.is((await exec(c, echo, key)).status, 200);
  const res = await mgmt(`/automation-keys/${id}`, {
    method: "PATCH",
    body: { name: "patched", operations: ["deploy"], rate_limit: 7 },
  });
  t.is(res.status, 200, describe(res));
  t.like(res.json, { id, name: "patched", operations: ["deploy"], rate_limit: 7, servers: [] });
  t.is(res.json.key, undefined);
  assertDetailOnly(t, await exec(c, echo, key), 403);
  t.regex(
    assertDetailOnly(
      t,
      await mgmt(`/automation-keys/${id}`, { method: "PATCH", body: { ip_allowlist: ["x"] } }),
      422,
    ),
    /ip_allowlist: 'x'/,
  );
  assertDetailOnly(t, await mgmt(`/automation-keys/${id}`, { method: "PATCH", body: {} }), 422);
});

test.serial("automation keys - another tenant's key id is 404 for PATCH and DELETE", async (t) => {
  const created = await mgmt("/automation-keys", { body: { name: "mine" } });
  const id = String(created.json.id);
  const opts = { apiKey: other.apiKey };
  assertDetailOnly(
    t,
    await mgmt(`/automation-keys/${id}`, { ...opts, method: "PATCH", body: { name: "x" } }),
    404,
  );
  assertDetailOnly(t, await mgmt(`/automation-keys/${id}`, { ...opts, method: "DELETE" }), 404);
  assertDetailOnly(t, await mgmt(`/automation-keys/${randomUUID()}`, { method: "DELETE" }), 404);
  assertDetailOnly(t, await mgmt("/automation-keys/not-a-uuid", { method: "DELETE" }), 404);
  const still = await exec(
    c,
    { server_id: c.serverId, command: "true", timeout_seconds: 30 },
    String(created.json.key),
  );
  t.is(still.status, 200, describe(still));
});

test.serial("automation keys - DELETE revokes: 204, the next use is 401, gone from the list", async (t) => {
  const created = await mgmt("/automation-keys", { body: { name: "doomed" } });
  const id = String(created.json.id);
  const key = String(created.json.key);
  const del = await mgmt(`/automation-keys/${id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  t.is(del.text, "");
  t.regex(assertDetailOnly(t, await api(c, `/operations/${randomUUID()}`, { key }), 401), /revoked/);
  const list = await mgmt("/automation-keys");
  t.false((list.json.automation_keys as { id: string }[]).some((k) => k.id === id));
  assertDetailOnly(t, await mgmt(`/automation-keys/${id}`, { method: "DELETE" }), 404);
});

test.serial("audit - key management is recorded with the acting API key and IP", async (t) => {
  const created = await mgmt("/automation-keys", { body: { name: "audited" } });
  const id = String(created.json.id);
  await mgmt(`/automation-keys/${id}`, { method: "PATCH", body: { rate_limit: 9 } });
  await mgmt(`/automation-keys/${id}`, { method: "DELETE" });
  const res = await mgmt("/audit?limit=1000");
  const mine = (res.json.events as Record<string, unknown>[]).filter((e) => e.key_id === id);
  t.deepEqual(
    mine.map((e) => e.event_type),
    ["automation_key.created", "automation_key.updated", "automation_key.revoked"],
  );
  for (const e of mine) {
    t.like(e.payload, { key_id: id, ip: "127.0.0.1", actor: { key_id: apiKeyId, key_type: "api_key" } });
    t.false(JSON.stringify(e).includes(String(created.json.key)));
  }
  t.like(mine[1].payload, { changed: ["rate_limit"] });
});

test.serial(
  "audit - GET /api/audit filters by run, operation, server and time, and pages by cursor",
  async (t) => {
    const runId = uniq("run");
    const since = new Date().toISOString();
    const ids: string[] = [];
    for (const n of [1, 2, 3]) {
      const res = await exec(c, {
        server_id: c.serverId,
        command: `echo ${n}`,
        run_id: runId,
        timeout_seconds: 30,
      });
      ids.push(String(res.json.operation_id));
    }
    const byRun = await mgmt(`/audit?run_id=${runId}`);
    t.is(byRun.status, 200, describe(byRun));
    const events = byRun.json.events as Record<string, unknown>[];
    // Each operation: its start event, then (once it finished) its completion event.
    const trail = ids.flatMap((id) => [
      ["operation.exec", id],
      ["operation.completed", id],
    ]);
    t.deepEqual(
      events.map((e) => [e.event_type, e.operation_id]),
      trail,
    );
    t.like(events[0], { event_type: "operation.exec", run_id: runId, server_id: c.serverId });
    t.like(events[0].payload, { command: "echo 1", run_id: runId });
    t.like(events[1], { event_type: "operation.completed", run_id: runId, server_id: c.serverId });
    t.like(events[1].payload, { operation_id: ids[0], status: "completed", exit_code: 0, stdout_bytes: 2 });
    t.regex(String((events[1].payload as Record<string, unknown>).result_hash), /^sha256:[0-9a-f]{64}$/);
    // The trail carries each operation's result with its event (an output preview: listing.test).
    t.like(events[2].outcome, {
      status: "completed",
      exit_code: 0,
      stdout: "2\n",
      stderr: "",
      stdout_truncated: false,
      stdout_bytes: 2,
    });
    t.regex(String(events[0].created_at), ISO_UTC);
    t.is(byRun.json.next_cursor, null);

    const byOp = await mgmt(`/audit?operation_id=${ids[1]}`);
    t.deepEqual(
      (byOp.json.events as { operation_id: string }[]).map((e) => e.operation_id),
      [ids[1], ids[1]],
    );
    const byServer = await mgmt(`/audit?server_id=${c.serverId}&since=${encodeURIComponent(since)}`);
    t.deepEqual(
      (byServer.json.events as { operation_id: string }[]).map((e) => e.operation_id),
      ids.flatMap((id) => [id, id]),
    );
    const future = await mgmt(
      `/audit?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`,
    );
    t.deepEqual(future.json.events, []);

    const paged: unknown[] = [];
    let cursor: unknown = "";
    for (let pages = 0; cursor !== null && pages < 10; pages++) {
      const res = await mgmt(`/audit?run_id=${runId}&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      paged.push(...(res.json.events as { operation_id: string }[]).map((e) => e.operation_id));
      cursor = res.json.next_cursor;
    }
    t.deepEqual(
      paged,
      ids.flatMap((id) => [id, id]),
    );
    // the other tenant sees none of it
    t.deepEqual((await mgmt(`/audit?run_id=${runId}`, { apiKey: other.apiKey })).json.events, []);
  },
);

for (const [what, query, field] of [
  ["limit 0", "limit=0", /limit/],
  ["limit 1001", "limit=1001", /limit/],
  ["limit not a number", "limit=ten", /limit/],
  ["bad since", "since=yesterday", /since/],
  ["bad operation_id", "operation_id=abc", /operation_id/],
  ["unknown filter", "tenant_id=x", /tenant_id/],
] as const) {
  test.serial(`audit - ${what} is 422 naming the field`, async (t) => {
    t.regex(assertDetailOnly(t, await mgmt(`/audit?${query}`), 422), field);
  });
}

test.serial(
  "operations - GET /operations?run_id lists the run's operations newest first, per tenant",
  async (t) => {
    const runId = uniq("run");
    const ids: string[] = [];
    for (const n of [1, 2]) {
      const res = await exec(c, {
        server_id: c.serverId,
        command: `echo ${n}`,
        run_id: runId,
        timeout_seconds: 30,
      });
      ids.push(String(res.json.operation_id));
    }
    const res = await api(c, `/operations?run_id=${runId}`);
    t.is(res.status, 200, describe(res));
    const ops = res.json.operations as Record<string, unknown>[];
    t.deepEqual(
      ops.map((o) => o.operation_id),
      [...ids].reverse(),
    );
    t.like(ops[0], { operation_type: "exec", status: "completed", run_id: runId, server_name: c.serverName });
    t.like(ops[0].result, { exit_code: 0, stdout: "2\n" });
    t.regex(assertDetailOnly(t, await api(c, "/operations"), 422), /run_id/);
    const otherKey = await c.admin(["create-automation-key", "--tenant", other.tenantId, "--name", "x"]);
    const theirs = await api(c, `/operations?run_id=${runId}`, { key: String(otherKey.key) });
    t.deepEqual(theirs.json.operations, []);
  },
);

test.serial("api keys - 100 requests a minute pass, the 101st is 429 with Retry-After", async (t) => {
  const { key, keyId } = await newApiKey(c.tenantId);
  await waitForMinuteRoom(20_000);
  for (let i = 0; i < 100; i++) {
    const res = await mgmt("/automation-keys", { apiKey: key });
    if (res.status !== 200) return t.fail(`request ${i + 1}: ${describe(res)}`);
  }
  for (let i = 0; i < 3; i++) {
    const res = await mgmt("/automation-keys", { apiKey: key });
    t.regex(assertDetailOnly(t, res, 429), /100 requests per minute/);
    const retry = Number(res.headers.get("retry-after"));
    t.true(Number.isInteger(retry) && retry >= 1 && retry <= 60, String(retry));
  }
  // another key of the tenant is not affected
  t.is((await mgmt("/automation-keys")).status, 200);
  const hits = await c.db.query("SELECT payload FROM audit_events WHERE key_id = ? AND event_type = ?", [
    keyId,
    "rate_limit.hit",
  ]);
  t.is(hits.length, 1);
  t.like(JSON.parse(String(hits[0].payload)), { limit: 100, window_seconds: 60, count: 101 });
});

test.serial("api keys - the 1,000-an-hour bound is enforced with Retry-After to the next hour", async (t) => {
  const { key, keyId } = await newApiKey(c.tenantId);
  // Reaching the bound through requests would take ten minutes at 100 a minute:
  // put this hour's counter at the bound instead, as 1,000 earlier requests would have.
  const hour = 3_600_000;
  const windowStart = Math.floor(Date.now() / hour) * hour;
  await c.db.query(
    "INSERT INTO rate_limit_counters (key_id, window_seconds, window_start, count) VALUES (?, 3600, ?, 1000)",
    [keyId, windowStart],
  );
  const res = await mgmt("/automation-keys", { apiKey: key });
  t.is(res.status, 429, describe(res));
  const retryAfter = Number(res.headers.get("retry-after"));
  t.true(retryAfter >= 1 && retryAfter <= 3600, `Retry-After ${res.headers.get("retry-after")}`);
  t.true(
    Math.abs(retryAfter - (windowStart + hour - Date.now()) / 1000) < 5,
    "Retry-After points at the next hour",
  );
});

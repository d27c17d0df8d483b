// Authentication (401 for missing, invalid, revoked, expired and retired keys), the error body
// shape of every refusal, 404 for an unknown server and 409 for a server whose agent is offline.
import test from "ava";
import { UUID, assertCompleted, assertError, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api, exec, getOperation, request } from "./harness/http";

// Each refusal is checked with its exact detail: one that changes its reason (a revoked key
// reported as merely invalid, a malformed header as an unknown key) fails here.
const INVALID_KEY = "invalid automation key";
const NOT_BEARER = "Authorization header must be 'Bearer <token>'";

// Tests here run one after another on one shared cluster, so each one checks its own behaviour;
// concurrent requests have their own tests (exec - ... at once / concurrent).
let c: Cluster;

test.before(async () => {
  c = await startCluster();
});
test.after.always(cleanupAll);

const echo = () => ({ server_id: c.serverId, command: "echo authed", timeout_seconds: 30 });

test.serial("auth - a valid key is accepted", async (t) => {
  assertCompleted(t, await exec(c, echo()), { exit_code: 0, stdout: "authed\n" });
});

test.serial("auth - missing Authorization header is 401", async (t) => {
  assertError(t, await exec(c, echo(), null), 401, "missing Authorization header: send 'Bearer rca_...'");
});

for (const [what, header, detail] of [
  ["garbage bearer", "Bearer garbage", "invalid automation key: keys start with rca_"],
  ["well-formed but unknown rca_ key", `Bearer rca_${"A1b2C3d4".repeat(5)}`, INVALID_KEY],
  ["non-bearer scheme", "Basic dXNlcjpwYXNz", NOT_BEARER],
  ["empty bearer", "Bearer ", NOT_BEARER],
]) {
  test.serial(`auth - ${what} is 401`, async (t) => {
    const res = await api(c, "/exec", { body: echo(), key: null, headers: { authorization: header } });
    assertError(t, res, 401, detail);
  });
}

test.serial("auth - a key with its last character changed is 401", async (t) => {
  const tampered = `${c.key.slice(0, -1)}${c.key.endsWith("a") ? "b" : "a"}`;
  assertError(t, await exec(c, echo(), tampered), 401, INVALID_KEY);
});

test.serial("auth - a revoked key is 401 immediately", async (t) => {
  const { key, keyId } = await c.createKey();
  assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "authed\n" });
  const revoked = await c.admin(["revoke-automation-key", "--key-id", keyId]);
  t.is(revoked.key_id, keyId);
  t.truthy(revoked.revoked_at);
  assertError(t, await exec(c, echo(), key), 401, "automation key has been revoked");
  assertError(
    t,
    await getOperation({ baseUrl: c.baseUrl, key }, "00000000-0000-4000-8000-000000000000"),
    401,
    "automation key has been revoked",
  );
});

test.serial("auth - an expired key is 401", async (t) => {
  // keys cannot be created expired (CLI and API refuse a past expiry): this one expires after
  const { key, keyId } = await c.createKey(["--expires-at", new Date(Date.now() + 60_000).toISOString()]);
  await c.db.query("UPDATE automation_keys SET expires_at = ? WHERE id = ?", [Date.now() - 1000, keyId]);
  t.true(key.startsWith("rca_"), key);
  assertError(t, await exec(c, echo(), key), 401, "automation key has expired");
});

test.serial("auth - a key that expires in the future is accepted", async (t) => {
  const { key } = await c.createKey(["--expires-at", new Date(Date.now() + 86_400_000).toISOString()]);
  assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "authed\n" });
});

test.serial("auth - a retired rk_t_ key is 401 with a detail saying it is retired", async (t) => {
  assertError(
    t,
    await exec(c, echo(), `rk_t_${"0123456789abcdef".repeat(2)}`),
    401,
    "Tenant Integration Keys (rk_t_) are retired: use an rca_ Automation key or OAuth",
  );
});

test.serial("errors - malformed JSON is 400 with exactly {detail} saying so", async (t) => {
  const res = await api(c, "/exec", {
    rawBody: '{"server_id": "x", "command": ',
    headers: { "content-type": "application/json" },
  });
  assertError(t, res, 400, /^request body is not valid JSON: /);
});

test.serial("errors - a non-JSON content type is 415 with exactly {detail}", async (t) => {
  const res = await api(c, "/exec", { rawBody: "command=echo", headers: { "content-type": "text/plain" } });
  assertError(t, res, 415, "unsupported content type: send application/json");
});

test.serial("errors - a JSON body that is not an object is 422 with exactly {detail}", async (t) => {
  const res = await api(c, "/exec", { rawBody: '["echo"]', headers: { "content-type": "application/json" } });
  assertError(t, res, 422, /^body: .*object/);
});

test.serial("errors - an unknown route is 404 with exactly {detail}, with or without a key", async (t) => {
  const detail = "route not found: GET /api/automation/v1/no-such-route";
  assertError(t, await api(c, "/no-such-route"), 404, detail);
  assertError(t, await api(c, "/no-such-route", { key: null }), 404, detail);
});

test.serial(
  "errors - an unknown route outside the automation API is 404 with exactly {detail}",
  async (t) => {
    assertError(
      t,
      await request(c, "/definitely/not/here"),
      404,
      "route not found: GET /definitely/not/here",
    );
  },
);

test.serial("exec - an unknown server (valid UUID) is 404", async (t) => {
  const res = await exec(c, { server_id: "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f", command: "true" });
  assertError(t, res, 404, "server '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f' not found");
});

/** An automation key of a new, other tenant. */
async function otherTenantKey(): Promise<string> {
  const other = await c.admin(["create-tenant", "--name", `other-${Date.now()}`]);
  const { key } = await c.admin([
    "create-automation-key",
    "--tenant",
    String(other.tenant_id),
    "--name",
    "other",
  ]);
  return String(key);
}

test.serial("exec - a server of another tenant is 404", async (t) => {
  const key = await otherTenantKey();
  const res = await exec(c, { server_id: c.serverId, command: "true" }, key);
  // The same detail as for a server that does not exist: nothing says it exists elsewhere.
  assertError(t, res, 404, `server '${c.serverId}' not found`);
});

test.serial(
  "exec - a server the api has found is kept, and still checked against every caller",
  async (t) => {
    // api/automation/servers.ts keeps servers it found (id, name and tenant never change):
    // once kept, another tenant's key still gets 404 and a key scoped elsewhere 403, and a
    // server enrolled a moment ago is found at once (an id not found is never kept).
    assertCompleted(t, await exec(c, { server_id: c.serverId, command: "echo kept", timeout_seconds: 30 }), {
      exit_code: 0,
      stdout: "kept\n",
    });
    const foreign = await otherTenantKey();
    const again = await exec(c, { server_id: c.serverId, command: "true" }, foreign);
    assertError(t, again, 404, `server '${c.serverId}' not found`);
    const fresh = await c.addServer({ start: false });
    const apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "kept"])).key);
    const created = await request(c, "/api/automation-keys", {
      key: null,
      headers: { "x-api-key": apiKey },
      body: { name: "scoped-kept", servers: [fresh.serverId] },
    });
    t.is(created.status, 201, describe(created));
    const scoped = String(created.json.key);
    const outside = await exec(c, { server_id: c.serverId, command: "true" }, scoped);
    assertError(t, outside, 403, `server '${c.serverName}' is outside this key's server scope`);
    const notConnected = await exec(c, { server_id: fresh.serverId, command: "true" }, scoped);
    t.is(notConnected.status, 409, describe(notConnected));
    t.is(notConnected.json.detail, `server '${fresh.serverName}' is not connected`);
  },
);

test.serial(
  "exec - server lookups made at the same time (read together) each see only their own tenant's servers",
  async (t) => {
    // Concurrent requests' server lookups are read in one query (api/automation/servers.ts):
    // mixed in one batch, another tenant's key gets 404 for this tenant's server, an unknown id
    // is 404, and this tenant's requests run — nothing leaks from one request to another.
    const otherKey = await otherTenantKey();
    const unknown = "5e1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
    const kinds = Array.from({ length: 30 }, (_, i) => (["own", "foreign", "unknown"] as const)[i % 3]!);
    const answers = await Promise.all(
      kinds.map((k) =>
        k === "own"
          ? exec(c, { server_id: c.serverId, command: "echo mine", timeout_seconds: 30 })
          : k === "foreign"
            ? exec(c, { server_id: c.serverId, command: "echo never", timeout_seconds: 30 }, otherKey)
            : exec(c, { server_id: unknown, command: "echo never", timeout_seconds: 30 }),
      ),
    );
    answers.forEach((res, i) => {
      if (kinds[i] === "own") assertCompleted(t, res, { exit_code: 0, stdout: "mine\n" });
      else assertError(t, res, 404, `server '${kinds[i] === "foreign" ? c.serverId : unknown}' not found`);
    });
  },
);

test.serial(
  "exec - a server whose agent is not connected is 409 fast and the operation is failed",
  async (t) => {
    const offline = await c.addServer({ start: false });
    const res = await exec(c, { server_id: offline.serverId, command: "echo never", timeout_seconds: 30 });
    t.is(res.status, 409, describe(res));
    t.deepEqual(Object.keys(res.json).sort(), ["detail", "operation_id"], describe(res));
    t.is(typeof res.json.detail, "string");
    t.true(String(res.json.detail).includes(offline.serverName), String(res.json.detail));
    t.regex(String(res.json.operation_id), UUID);
    // Fast: answered before the exec's own timeout_seconds, not after waiting it out for an agent.
    t.true(res.elapsedMs < 30_000, `409 took ${res.elapsedMs} ms`);

    const op = await getOperation(c, String(res.json.operation_id));
    t.is(op.status, 200, describe(op));
    t.like(op.json, {
      operation_id: res.json.operation_id,
      operation_type: "exec",
      server_id: offline.serverId,
      server_name: offline.serverName,
      status: "failed",
    });
  },
);

// Authentication (401 for missing, invalid, revoked, expired and retired keys), the error body
// shape of every refusal, 404 for an unknown server and 409 for a server whose agent is offline.
import test from "ava";
import { UUID, assertCompleted, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api, exec, getOperation, request } from "./harness/http";

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
  assertDetailOnly(t, await exec(c, echo(), null), 401);
});

for (const [what, header] of [
  ["garbage bearer", "Bearer garbage"],
  ["well-formed but unknown rca_ key", `Bearer rca_${"A1b2C3d4".repeat(5)}`],
  ["non-bearer scheme", "Basic dXNlcjpwYXNz"],
  ["empty bearer", "Bearer "],
]) {
  test.serial(`auth - ${what} is 401`, async (t) => {
    const res = await api(c, "/exec", { body: echo(), key: null, headers: { authorization: header } });
    assertDetailOnly(t, res, 401);
  });
}

test.serial("auth - a key with its last character changed is 401", async (t) => {
  const tampered = `${c.key.slice(0, -1)}${c.key.endsWith("a") ? "b" : "a"}`;
  assertDetailOnly(t, await exec(c, echo(), tampered), 401);
});

test.serial("auth - a revoked key is 401 immediately", async (t) => {
  const { key, keyId } = await c.createKey();
  assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "authed\n" });
  const revoked = await c.admin(["revoke-automation-key", "--key-id", keyId]);
  t.is(revoked.key_id, keyId);
  t.truthy(revoked.revoked_at);
  assertDetailOnly(t, await exec(c, echo(), key), 401);
  assertDetailOnly(
    t,
    await getOperation({ baseUrl: c.baseUrl, key }, "00000000-0000-4000-8000-000000000000"),
    401,
  );
});

test.serial("auth - an expired key is 401", async (t) => {
  // keys cannot be created expired (CLI and API refuse a past expiry): this one expires after
  const { key, keyId } = await c.createKey(["--expires-at", new Date(Date.now() + 60_000).toISOString()]);
  await c.db.query("UPDATE automation_keys SET expires_at = ? WHERE id = ?", [Date.now() - 1000, keyId]);
  t.true(key.startsWith("rca_"), key);
  assertDetailOnly(t, await exec(c, echo(), key), 401);
});

test.serial("auth - a key that expires in the future is accepted", async (t) => {
  const { key } = await c.createKey(["--expires-at", new Date(Date.now() + 86_400_000).toISOString()]);
  assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "authed\n" });
});

test.serial("auth - a retired rk_t_ key is 401 with a detail saying it is retired", async (t) => {
  const detail = assertDetailOnly(t, await exec(c, echo(), `rk_t_${"0123456789abcdef".repeat(2)}`), 401);
  t.regex(detail, /retired/i);
});

test.serial("errors - malformed JSON is a 4xx with exactly {detail}", async (t) => {
  const res = await api(c, "/exec", {
    rawBody: '{"server_id": "x", "command": ',
    headers: { "content-type": "application/json" },
  });
  t.true(res.status >= 400 && res.status < 500, describe(res));
  assertDetailOnly(t, res, res.status);
});

test.serial("errors - a non-JSON content type is a 4xx with exactly {detail}", async (t) => {
  const res = await api(c, "/exec", { rawBody: "command=echo", headers: { "content-type": "text/plain" } });
  t.true(res.status >= 400 && res.status < 500, describe(res));
  assertDetailOnly(t, res, res.status);
});

test.serial("errors - a JSON body that is not an object is 422 with exactly {detail}", async (t) => {
  const res = await api(c, "/exec", { rawBody: '["echo"]', headers: { "content-type": "application/json" } });
  t.true(res.status === 422 || res.status === 400, describe(res));
  assertDetailOnly(t, res, res.status);
});

test.serial("errors - an unknown route is 404 with exactly {detail}", async (t) => {
  assertDetailOnly(t, await api(c, "/no-such-route"), 404);
  const anonymous = await api(c, "/no-such-route", { key: null });
  t.true(anonymous.status === 401 || anonymous.status === 404, describe(anonymous));
  assertDetailOnly(t, anonymous, anonymous.status);
});

test.serial(
  "errors - an unknown route outside the automation API is 404 with exactly {detail}",
  async (t) => {
    assertDetailOnly(t, await request(c, "/definitely/not/here"), 404);
  },
);

test.serial("exec - an unknown server (valid UUID) is 404", async (t) => {
  const res = await exec(c, { server_id: "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f", command: "true" });
  assertDetailOnly(t, res, 404);
});

test.serial("exec - a server of another tenant is 404", async (t) => {
  const other = await c.admin(["create-tenant", "--name", `other-${Date.now()}`]);
  const { key } = await c.admin([
    "create-automation-key",
    "--tenant",
    String(other.tenant_id),
    "--name",
    "other",
  ]);
  const res = await exec(c, { server_id: c.serverId, command: "true" }, String(key));
  assertDetailOnly(t, res, 404);
});

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
    t.true(res.elapsedMs < 5000, `409 took ${res.elapsedMs} ms`);

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

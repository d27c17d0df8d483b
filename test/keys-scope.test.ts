// Scope checks of automation keys on every Automation API call: operations, servers and the
// IP allowlist (403 with a detail that says which), with and without RELAYCTL_TRUST_PROXY,
// and the auth.refused audit events of known keys.
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertCompleted, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ControlPlane, startControlPlane } from "./harness/control-plane";
import { api, exec, request } from "./harness/http";

let c: Cluster;
let apiKey: string;
/** A second api process on the same database, with RELAYCTL_TRUST_PROXY=true. */
let proxied: ControlPlane;

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci"])).key);
  proxied = await startControlPlane({
    ...c.api.opts,
    env: { ...c.api.opts.env, RELAYCTL_TRUST_PROXY: "true" },
  });
});
test.after.always(async () => {
  await proxied?.stop();
  await cleanupAll();
});

async function automationKey(scope: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const res = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: `scoped-${randomUUID().slice(0, 6)}`, ...scope },
  });
  if (res.status !== 201) throw new Error(`create key: ${describe(res)}`);
  return { id: String(res.json.id), key: String(res.json.key) };
}

const echo = () => ({ server_id: c.serverId, command: "echo in-scope", timeout_seconds: 30 });
const unknownOp = () => `/operations/${randomUUID()}`;

async function refusals(keyId: string) {
  const rows = await c.db.query(
    "SELECT payload FROM audit_events WHERE key_id = ? AND event_type = ? ORDER BY seq",
    [keyId, "auth.refused"],
  );
  return rows.map((r) => JSON.parse(String(r.payload)) as Record<string, unknown>);
}

test.serial("scope - a key with the exec operation may exec", async (t) => {
  const { key } = await automationKey({ operations: ["exec", "deploy"] });
  assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "in-scope\n" });
});

test.serial("scope - exec with a key lacking the exec operation is 403, audited", async (t) => {
  const { id, key } = await automationKey({ operations: ["deploy"] });
  t.regex(assertDetailOnly(t, await exec(c, echo(), key), 403), /operation 'exec'/);
  // refused before the body is looked at
  assertDetailOnly(t, await exec(c, { command: 5 }, key), 403);
  const events = await refusals(id);
  t.is(events.length, 2);
  t.like(events[0], { status: 403, code: "RC_ERR_FORBIDDEN", ip: "127.0.0.1", actor: { key_id: id } });
  t.is(await c.db.query("SELECT id FROM operations WHERE key_id = ?", [id]).then((r) => r.length), 0);
});

test.serial("scope - exec on a server outside the key's servers is 403", async (t) => {
  const second = await c.addServer({ start: false });
  const { id, key } = await automationKey({ servers: [second.serverId] });
  t.regex(assertDetailOnly(t, await exec(c, echo(), key), 403), /server scope/);
  t.like((await refusals(id))[0], { status: 403, path: "/api/automation/v1/exec" });
});

test.serial("scope - a caller IP outside the allowlist is 403 naming the IP", async (t) => {
  const { id, key } = await automationKey({ ip_allowlist: ["10.0.0.0/8", "2001:db8::/32"] });
  const detail = assertDetailOnly(t, await exec(c, echo(), key), 403);
  t.regex(detail, /127\.0\.0\.1.*allowlist/);
  t.like((await refusals(id))[0], { code: "RC_ERR_IP_NOT_ALLOWED", ip: "127.0.0.1" });
});

test.serial("scope - a caller IP inside the allowlist (address or range) passes", async (t) => {
  for (const allow of [["127.0.0.1"], ["10.0.0.0/8", "127.0.0.0/8"], ["::1", "127.0.0.1/32"]]) {
    const { key } = await automationKey({ ip_allowlist: allow });
    assertCompleted(t, await exec(c, echo(), key), { exit_code: 0, stdout: "in-scope\n" });
  }
});

test.serial("scope - without RELAYCTL_TRUST_PROXY, X-Forwarded-For is ignored", async (t) => {
  const { key } = await automationKey({ ip_allowlist: ["203.0.113.0/24"] });
  const res = await api(c, unknownOp(), { key, headers: { "x-forwarded-for": "203.0.113.7" } });
  t.regex(assertDetailOnly(t, res, 403), /127\.0\.0\.1/);
});

test.serial("scope - with RELAYCTL_TRUST_PROXY=true, X-Forwarded-For is the caller IP", async (t) => {
  const { id, key } = await automationKey({ ip_allowlist: ["203.0.113.0/24"] });
  const target = { baseUrl: proxied.apiUrl, key };
  // 404: through auth and scope checks to the (unknown) operation
  assertDetailOnly(t, await api(target, unknownOp(), { headers: { "x-forwarded-for": "203.0.113.7" } }), 404);
  const outside = await api(target, unknownOp(), { headers: { "x-forwarded-for": "198.51.100.1" } });
  t.regex(assertDetailOnly(t, outside, 403), /198\.51\.100\.1/);
  t.regex(assertDetailOnly(t, await api(target, unknownOp()), 403), /127\.0\.0\.1/);
  const events = await refusals(id);
  t.deepEqual(
    events.map((e) => e.ip),
    ["198.51.100.1", "127.0.0.1"],
  );
});

test.serial("scope - revoked and expired keys are audited as refused; unknown keys are not", async (t) => {
  const { id, key } = await automationKey({});
  await request(c, `/api/automation-keys/${id}`, {
    method: "DELETE",
    key: null,
    headers: { "x-api-key": apiKey },
  });
  assertDetailOnly(t, await api(c, unknownOp(), { key }), 401);
  t.like((await refusals(id))[0], { status: 401, code: "RC_ERR_KEY_REVOKED" });

  const expired = await c.createKey(["--expires-at", "2020-01-01T00:00:00Z"]);
  assertDetailOnly(t, await api(c, unknownOp(), { key: expired.key }), 401);
  t.like((await refusals(expired.keyId))[0], { status: 401, code: "RC_ERR_KEY_EXPIRED" });

  const before = await c.db.query("SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'auth.refused'");
  assertDetailOnly(t, await api(c, unknownOp(), { key: `rca_${"Z9y8X7w6".repeat(5)}` }), 401);
  const after = await c.db.query("SELECT COUNT(*) AS n FROM audit_events WHERE event_type = 'auth.refused'");
  t.is(Number(after[0].n), Number(before[0].n));
});

/** `GET /operations?run_id=` with `key`: the operation ids listed. */
async function listed(runId: string, key: string): Promise<string[]> {
  const res = await api(c, `/operations?run_id=${runId}`, { key });
  if (res.status !== 200) throw new Error(`list: ${describe(res)}`);
  return (res.json.operations as { operation_id: string }[]).map((o) => o.operation_id).sort();
}

test.serial(
  "scope - reads: an operation outside the key's servers is 404 like an unknown id, and unlisted",
  async (t) => {
    const prod = await c.addServer({ start: true, name: `prod-${randomUUID().slice(0, 6)}` });
    const runId = `ci-${randomUUID()}`;
    const on = async (serverId: string, text: string) => {
      const res = await exec(c, {
        server_id: serverId,
        command: `echo ${text}`,
        run_id: runId,
        timeout_seconds: 30,
      });
      assertCompleted(t, res, { exit_code: 0, stdout: `${text}\n` });
      return String(res.json.operation_id);
    };
    const onStaging = await on(c.serverId, "staging-out");
    const onProd = await on(prod.serverId, "prod-secret-out");
    const staging = await automationKey({ servers: [c.serverId], operations: ["exec"] });

    const mine = await api(c, `/operations/${onStaging}`, { key: staging.key });
    t.is(mine.status, 200, describe(mine));
    t.like(mine.json, { operation_id: onStaging, result: { stdout: "staging-out\n" } });

    const theirs = await api(c, `/operations/${onProd}`, { key: staging.key });
    const unknownId = randomUUID();
    const unknown = await api(c, `/operations/${unknownId}`, { key: staging.key });
    t.is(assertDetailOnly(t, theirs, 404), `operation '${onProd}' not found`);
    t.is(assertDetailOnly(t, unknown, 404), `operation '${unknownId}' not found`);
    t.false(theirs.text.includes("prod-secret-out"));

    t.deepEqual(await listed(runId, staging.key), [onStaging]);
    t.deepEqual(await listed(runId, c.key), [onStaging, onProd].sort(), "an unscoped key reads both");
  },
);

test.serial("scope - reads: an operation whose type is outside the key's operations is hidden", async (t) => {
  const runId = `ci-${randomUUID()}`;
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo typed",
    run_id: runId,
    timeout_seconds: 30,
  });
  const execId = String(res.json.operation_id);
  // A route sync of the same run, written straight into the table: this test is about the read path.
  const syncId = randomUUID();
  await c.db.query(
    `INSERT INTO operations (id, tenant_id, server_id, operation_type, status, delivery, run_id, exit_code,
       stdout, stderr, duration_ms, started_at, completed_at)
     VALUES (?, ?, ?, 'route_sync', 'completed', 'finished', ?, 0, 'synced', '', 5, ?, ?)`,
    [syncId, c.tenantId, c.serverId, runId, Date.now(), Date.now()],
  );
  const restartOnly = await automationKey({ operations: ["restart"] });
  t.deepEqual(await listed(runId, restartOnly.key), []);
  assertDetailOnly(t, await api(c, `/operations/${execId}`, { key: restartOnly.key }), 404);

  // route_sync operations belong to the external_deploy scope.
  const deployer = await automationKey({ operations: ["external_deploy"] });
  t.deepEqual(await listed(runId, deployer.key), [syncId]);
  t.is((await api(c, `/operations/${syncId}`, { key: deployer.key })).status, 200);
  assertDetailOnly(t, await api(c, `/operations/${execId}`, { key: deployer.key }), 404);
  const execer = await automationKey({ operations: ["exec"] });
  t.deepEqual(await listed(runId, execer.key), [execId]);
  assertDetailOnly(t, await api(c, `/operations/${syncId}`, { key: execer.key }), 404);
});

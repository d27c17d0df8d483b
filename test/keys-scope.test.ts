// Scope checks of automation keys on every Automation API call: operations, servers and the
// IP allowlist (403 with a detail that says which), with and without trusted proxies
// (RELAYCTL_TRUSTED_PROXIES), and the auth.refused audit events of known keys (one per key
// and minute window).
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertCompleted, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ControlPlane, startControlPlane } from "./harness/control-plane";
import { api, exec, request } from "./harness/http";
import { waitForMinuteRoom } from "./harness/wait";

let c: Cluster;
let apiKey: string;
/** A second api process on the same database, behind a "proxy" at 127.0.0.1 (RELAYCTL_TRUSTED_PROXIES). */
let proxied: ControlPlane;

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci"])).key);
  proxied = await startControlPlane({
    ...c.api.opts,
    env: { ...c.api.opts.env, RELAYCTL_TRUSTED_PROXIES: "127.0.0.1" },
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

test.serial("scope - exec with a key lacking the exec operation is 403, audited once a window", async (t) => {
  const { id, key } = await automationKey({ operations: ["deploy"] });
  await waitForMinuteRoom(15_000);
  t.regex(assertDetailOnly(t, await exec(c, echo(), key), 403), /operation 'exec'/);
  // refused before the body is looked at
  assertDetailOnly(t, await exec(c, { command: 5 }, key), 403);
  const events = await refusals(id);
  t.is(events.length, 1, "one auth.refused per key and minute window");
  const [counter] = await c.db.query("SELECT refused FROM rate_limit_counters WHERE key_id = ?", [id]);
  t.is(Number(counter.refused), 2, "both refusals are counted");
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

test.serial("scope - without trusted proxies, X-Forwarded-For is ignored", async (t) => {
  const { key } = await automationKey({ ip_allowlist: ["203.0.113.0/24"] });
  const res = await api(c, unknownOp(), { key, headers: { "x-forwarded-for": "203.0.113.7" } });
  t.regex(assertDetailOnly(t, res, 403), /127\.0\.0\.1/);
});

test.serial("scope - behind a trusted proxy, the address it appends is the caller IP", async (t) => {
  const { id, key } = await automationKey({ ip_allowlist: ["203.0.113.0/24"] });
  const target = { baseUrl: proxied.apiUrl, key };
  // 404: through auth and scope checks to the (unknown) operation
  assertDetailOnly(t, await api(target, unknownOp(), { headers: { "x-forwarded-for": "203.0.113.7" } }), 404);
  await waitForMinuteRoom(15_000);
  const outside = await api(target, unknownOp(), { headers: { "x-forwarded-for": "198.51.100.1" } });
  t.regex(assertDetailOnly(t, outside, 403), /198\.51\.100\.1/);
  t.regex(assertDetailOnly(t, await api(target, unknownOp()), 403), /127\.0\.0\.1/);
  const events = await refusals(id);
  t.deepEqual(
    events.map((e) => e.ip),
    ["198.51.100.1"],
    "the window's first refusal is audited",
  );
});

test.serial(
  "scope - a forged X-Forwarded-For entry neither passes the allowlist nor reaches the audit trail",
  async (t) => {
    // The proxy appends the real client (198.51.100.1) to what the client sent (10.1.1.1),
    // as nginx's $proxy_add_x_forwarded_for and cloud load balancers do.
    const forged = { "x-forwarded-for": "10.1.1.1, 198.51.100.1" };
    const { id, key } = await automationKey({ ip_allowlist: ["10.0.0.0/8"] });
    const res = await api({ baseUrl: proxied.apiUrl, key }, unknownOp(), { headers: forged });
    t.regex(assertDetailOnly(t, res, 403), /caller IP 198\.51\.100\.1 is not in this key's IP allowlist/);
    t.like((await refusals(id))[0], { code: "RC_ERR_IP_NOT_ALLOWED", ip: "198.51.100.1" });
    const stored = await c.db.query("SELECT payload FROM audit_events WHERE key_id = ?", [id]);
    t.false(
      stored.some((r) => String(r.payload).includes("10.1.1.1")),
      "the forged address is nowhere in the key's events",
    );
    // a key that allows the real address is admitted through the same proxy
    const real = await automationKey({ ip_allowlist: ["198.51.100.0/24"] });
    assertDetailOnly(
      t,
      await api({ baseUrl: proxied.apiUrl, key: real.key }, unknownOp(), { headers: forged }),
      404,
    );
  },
);

test.serial("scope - revoked and expired keys are audited as refused; unknown keys are not", async (t) => {
  const { id, key } = await automationKey({});
  await request(c, `/api/automation-keys/${id}`, {
    method: "DELETE",
    key: null,
    headers: { "x-api-key": apiKey },
  });
  assertDetailOnly(t, await api(c, unknownOp(), { key }), 401);
  t.like((await refusals(id))[0], { status: 401, code: "RC_ERR_KEY_REVOKED" });

  // expired since it was made (the CLI and the API refuse to create an expired key)
  const expired = await c.createKey(["--expires-at", new Date(Date.now() + 86_400_000).toISOString()]);
  await c.db.query("UPDATE automation_keys SET expires_at = ? WHERE id = ?", [
    Date.now() - 1000,
    expired.keyId,
  ]);
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

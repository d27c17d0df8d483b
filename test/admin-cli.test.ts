// The operator CLI against a real installation: it creates keys through the same key
// service as the API (a past expiry refused, non-zero exit, nothing stored; the same audit
// actor shape), and `admin revoke-agent` makes the gateway refuse an agent's credential.
import { spawnSync } from "node:child_process";
import test from "ava";
import { assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { SERVER_MAIN } from "./harness/programs";

let c: Cluster;
let apiKey: string;

test.before(async () => {
  c = await startCluster();
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);
});
test.after.always(cleanupAll);

async function createdPayload(keyId: string) {
  const [row] = await c.db.query(
    "SELECT payload FROM audit_events WHERE key_id = ? AND event_type = 'automation_key.created'",
    [keyId],
  );
  return JSON.parse(String(row.payload)) as Record<string, unknown>;
}

test.serial(
  "admin cli - a past --expires-at is refused with a clear message, exit 1, nothing stored",
  async (t) => {
    const args = ["--tenant", c.tenantId, "--name", "stale", "--expires-at", "2020-01-01T00:00:00Z"];
    const run = spawnSync(process.execPath, [SERVER_MAIN, "admin", "create-automation-key", ...args], {
      env: { PATH: process.env.PATH, RELAYCTL_DATABASE_URL: c.db.url },
      encoding: "utf8",
      timeout: 30_000,
    });
    t.is(run.status, 1);
    t.is(run.stdout, "");
    t.is(run.stderr, "relayctl-server: expires_at: '2020-01-01T00:00:00Z' is in the past\n");
    const bad = await t.throwsAsync(
      c.admin(["create-automation-key", "--tenant", c.tenantId, "--name", "x", "--rate-limit", "5000"]),
    );
    t.regex(bad!.message, /relayctl-server: --rate-limit: must be <= 1000/);
    const rows = await c.db.query("SELECT id FROM automation_keys WHERE name IN ('stale', 'x')");
    t.is(rows.length, 0);
    // the API says the same about the same input
    const res = await request(c, "/api/automation-keys", {
      key: null,
      headers: { "x-api-key": apiKey },
      body: { name: "stale", expires_at: "2020-01-01T00:00:00Z" },
    });
    t.is(assertDetailOnly(t, res, 422), "expires_at: '2020-01-01T00:00:00Z' is in the past");
  },
);

test.serial("admin cli - keys made by the CLI and the API carry the same audit actor shape", async (t) => {
  const cli = await c.admin(["create-automation-key", "--tenant", c.tenantId, "--name", "cli-made"]);
  const api = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: "api-made" },
  });
  t.is(api.status, 201);
  const fromCli = await createdPayload(String(cli.key_id));
  const fromApi = await createdPayload(String(api.json.id));
  t.deepEqual(Object.keys(fromCli).sort(), Object.keys(fromApi).sort());
  t.deepEqual(fromCli.actor, { key_type: "operator_cli" });
  t.like(fromApi.actor as object, { key_type: "api_key", key_name: "ops" });
});

test.serial(
  "admin cli - revoke-agent: the gateway refuses the credential from the next connect",
  async (t) => {
    const s = await c.addServer({ start: true });
    await s.agent!.stop();
    const out = await c.admin(["revoke-agent", "--server", s.serverName]);
    t.like(out, { server_id: s.serverId, server_name: s.serverName });
    const [row] = await c.db.query("SELECT agent_credential_hash FROM servers WHERE id = ?", [s.serverId]);
    t.is(row.agent_credential_hash, null);
    const [event] = await c.db.query(
      "SELECT payload FROM audit_events WHERE server_id = ? AND event_type = 'agent.credential_revoked'",
      [s.serverId],
    );
    t.like(JSON.parse(String(event.payload)), { server_id: s.serverId, actor: { key_type: "operator_cli" } });
    // the same agent, same state dir and credential, starts again and is turned away
    const restarted = s.agent!.start();
    restarted.catch(() => {});
    await s.agent!.proc.waitForMsg("gateway rejected the agent credential", { timeoutMs: 30_000 });
    await s.agent!.stop();
    t.false(s.agent!.proc.text().includes('"msg":"connected"'));
    // an unknown server is a clear error
    const err = await t.throwsAsync(c.admin(["revoke-agent", "--server", "no-such-server"]));
    t.regex(err!.message, /server 'no-such-server' not found/);
  },
);

test.serial("admin cli - revoke-agent closes the stream of an agent that is connected now", async (t) => {
  const s = await c.addServer({ start: true });
  const before = await exec(c, { server_id: s.serverId, command: "echo still-trusted", timeout_seconds: 30 });
  t.is(before.status, 200, JSON.stringify(before.json));
  await c.admin(["revoke-agent", "--server", s.serverName]);
  // The gateway ends the open stream; the agent's reconnect is then turned away.
  await s.agent!.proc.waitForMsg("gateway rejected the agent credential", { timeoutMs: 30_000 });
  const after = await exec(c, { server_id: s.serverId, command: "echo revoked", timeout_seconds: 5 });
  t.is(after.status, 409);
  t.is(after.json.detail, `server '${s.serverName}' is not connected`);
  await s.agent!.stop();
});

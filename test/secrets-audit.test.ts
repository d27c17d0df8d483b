// env values are never stored or logged (contract, Authentication 7), and every operation has
// one audit event carrying its run_id, run_context and the env key names, written before it
// runs, and one completion event carrying the hash of its result.
import { createHash } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { assertCompleted, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, waitForOperationEnd } from "./harness/http";
import { assertAbsent, filesText, plantSecret } from "./harness/leaks";
import type { Row } from "./harness/mariadb";
import { CHAIN_KEY, canonical, eventHash } from "./harness/audit-chain";

let c: Cluster;

test.before(async () => {
  // Own NATS: its JetStream store dir is ours to inspect.
  c = await startCluster({ ownNats: true });
});
test.after.always(cleanupAll);

/** Runs one fast exec and one that outlives timeout_seconds, both with planted env values. */
async function runWithSecrets(t: ExecutionContext, secrets: string[]): Promise<string[]> {
  const env = { DEPLOY_TOKEN: secrets[0]!, DB_PASSWORD: secrets[1]! };
  // The command proves it saw the values without printing them.
  const check = 'test "${#DEPLOY_TOKEN}" -eq 32 && test -n "$DB_PASSWORD" && echo saw-secrets';
  const fast = await exec(c, { server_id: c.serverId, command: check, env, timeout_seconds: 30 });
  assertCompleted(t, fast, { exit_code: 0, stdout: "saw-secrets\n" });
  const slow = await exec(c, {
    server_id: c.serverId,
    command: `sleep 1.5; ${check}`,
    env,
    timeout_seconds: 1,
  });
  t.is(slow.status, 202, describe(slow));
  const done = await waitForOperationEnd(c, String(slow.json.operation_id), 20_000);
  t.like(done.json, { status: "completed", result: { exit_code: 0, stdout: "saw-secrets\n" } });
  return [String(fast.json.operation_id), String(slow.json.operation_id)];
}

test.serial("secrets - env values appear in no table, no log and no audit event", async (t) => {
  const secrets = [plantSecret(), plantSecret()];
  const ids = await runWithSecrets(t, secrets);

  const dump = await c.db.dumpText();
  for (const id of ids) t.true(dump.includes(id), `the dump should contain operation ${id}`);
  assertAbsent(t, dump, secrets, "the database");

  const audit = await c.db.query("SELECT * FROM audit_events");
  t.true(audit.length > 0);
  assertAbsent(t, JSON.stringify(audit), secrets, "audit_events");

  const logs = c.logText();
  t.true(logs.length > 0, "the processes logged something");
  assertAbsent(t, logs, secrets, "the control-plane and agent logs");
  // Also the log files on disk (every byte written, including lines not parsed as JSON).
  const onDisk = filesText(c.dir, (f) => f.endsWith(".log"))
    .map(([, text]) => text)
    .join("\n");
  assertAbsent(t, onDisk, secrets, "the log files");
});

test.serial("secrets - env values are not written to disk by the agent or the bus", async (t) => {
  const secrets = [plantSecret(), plantSecret()];
  await runWithSecrets(t, secrets);
  const agentFiles = filesText(c.agent.stateDir);
  t.true(agentFiles.length > 0, "the agent state dir holds agent.json");
  for (const [file, text] of agentFiles) assertAbsent(t, text, secrets, file);
  if (c.nats.storeDir) {
    let natsFiles: [string, string][] = [];
    try {
      natsFiles = filesText(c.nats.storeDir);
    } catch {
      // No JetStream store at all: nothing stored.
    }
    for (const [file, text] of natsFiles) assertAbsent(t, text, secrets, file);
  }
});

/** An audit row with its JSON payload's fields merged in (columns win for plain ids). */
function auditView(row: Row): Record<string, unknown> {
  const view: Record<string, unknown> = {};
  for (const value of Object.values(row)) {
    let parsed: unknown = value;
    if (typeof value === "string" && value.startsWith("{")) {
      try {
        parsed = JSON.parse(value);
      } catch {
        parsed = value;
      }
    }
    if (parsed !== null && typeof parsed === "object" && !Buffer.isBuffer(parsed))
      Object.assign(view, parsed);
  }
  for (const [k, v] of Object.entries(row)) if (v !== null && typeof v !== "object") view[k] ??= v;
  return view;
}

async function auditRowsFor(operationId: string): Promise<Row[]> {
  const rows = await c.db.query("SELECT * FROM audit_events");
  return rows.filter((r) => JSON.stringify(r).includes(operationId));
}

test.serial(
  "audit - one start event per operation with command, server, key, run_id, run_context and env key names, and one completion event",
  async (t) => {
    const columns = (await c.db.query("SHOW COLUMNS FROM audit_events")).map((r) => String(r.Field));
    t.log(`audit_events columns: ${columns.join(", ")}`);
    const run_context = {
      provider: "github",
      repository: "acme/shop",
      workflow: "deploy.yml",
      trigger: "push",
      actor: "octocat",
      sha: "89abcdef0123456789abcdef0123456789abcdef",
      ref: "refs/heads/main",
    };
    const runId = `audit-run-${Date.now()}`;
    const command = "echo audited";
    const env = { ZETA_KEY: plantSecret(), ALPHA_KEY: plantSecret() };
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await exec(c, {
        server_id: c.serverId,
        command,
        env,
        run_id: runId,
        run_context,
        timeout_seconds: 30,
      });
      assertCompleted(t, res, { exit_code: 0, stdout: "audited\n" });
      ids.push(String(res.json.operation_id));
    }
    for (const id of ids) {
      const rows = await auditRowsFor(id);
      t.deepEqual(
        rows.map((r) => r.event_type),
        ["operation.exec", "operation.completed"],
        `audit events for operation ${id}: ${JSON.stringify(rows)}`,
      );
      const done = auditView(rows[1] ?? {});
      t.like(done, { operation_id: id, status: "completed", exit_code: 0, run_id: runId });
      const [op] = await c.db.query("SELECT stdout, stderr, duration_ms FROM operations WHERE id = ?", [id]);
      const result = {
        status: "completed",
        exit_code: 0,
        stdout: op!.stdout,
        stderr: op!.stderr,
        duration_ms: Number(op!.duration_ms),
      };
      t.is(done.result_hash, `sha256:${createHash("sha256").update(canonical(result)).digest("hex")}`);
      const view = auditView(rows[0] ?? {});
      t.is(view.operation_id, id);
      t.is(view.command, command);
      t.is(view.server_id, c.serverId);
      t.is(view.key_id, c.keyId);
      t.is(view.run_id, runId);
      t.deepEqual(view.run_context, run_context);
      t.deepEqual([...((view.env_keys as string[]) ?? [])].sort(), ["ALPHA_KEY", "ZETA_KEY"]);
      assertAbsent(t, JSON.stringify(rows), Object.values(env), "the audit event");
    }
  },
);

test.serial("audit - a refused exec (agent not connected) is audited too", async (t) => {
  const offline = await c.addServer({ start: false });
  const res = await exec(c, { server_id: offline.serverId, command: "echo offline", run_id: "r-off" });
  t.is(res.status, 409, describe(res));
  const rows = await auditRowsFor(String(res.json.operation_id));
  t.deepEqual(
    rows.map((r) => r.event_type),
    ["operation.exec", "operation.completed"],
    JSON.stringify(rows),
  );
  t.like(auditView(rows[1] ?? {}), { status: "failed" });
  const view = auditView(rows[0] ?? {});
  t.is(view.server_id, offline.serverId);
  t.is(view.run_id, "r-off");
  t.is(view.command, "echo offline");
});

test.serial(
  "audit - events form an unbroken HMAC chain per tenant, concurrent writers included",
  async (t) => {
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        exec(c, { server_id: c.serverId, command: `echo chain-${i}`, timeout_seconds: 30 }),
      ),
    );
    const rows = await c.db.query("SELECT * FROM audit_events WHERE tenant_id = ? ORDER BY seq", [
      c.tenantId,
    ]);
    t.true(rows.length >= 10);
    let prev: string | null = null;
    for (const [i, row] of rows.entries()) {
      t.is(Number(row.seq), i + 1, "seq has no gaps");
      t.is(row.prev_hash, prev, `event ${row.seq} links to the previous one`);
      t.is(row.hash_alg, "hmac-sha256");
      t.is(row.hash, eventHash(row, prev, CHAIN_KEY), `event ${row.seq} hash`);
      prev = String(row.hash);
    }
  },
);

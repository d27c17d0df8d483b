// POST /reboot without a cloud provider: api → NATS → gateway → agent, which acks and
// runs its reboot command. A real reboot is out of reach here, so the command is a
// script that does what a reboot does to the agent: the machine gets a new boot id
// (the agent reads it from RELAYCTL_AGENT_BOOT_ID_FILE) and the agent dies. The test
// then starts the agent again, as systemd would at boot.
import { randomUUID } from "node:crypto";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { Agent } from "./harness/agent";
import { UUID, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { api, request, waitForOperationEnd } from "./harness/http";

const REBOOT_TIMEOUT_SECONDS = 8;
const dir = makeTempDir("reboot-agent");

/** "Reboots": a new boot id into $2, then SIGKILL to the agent ($1, the shell's parent). */
const rebootScript = join(dir, "fake-reboot.sh");
writeFileSync(rebootScript, `#!/bin/sh\ncat /proc/sys/kernel/random/uuid > "$2"\nkill -9 "$1"\n`);
chmodSync(rebootScript, 0o755);

/** Agent env for a machine whose boot id lives in its own file. */
function machine(name: string, command?: string): { env: Record<string, string>; bootFile: string } {
  const bootFile = join(dir, `${name}.boot_id`);
  writeFileSync(bootFile, `${randomUUID()}\n`);
  return {
    bootFile,
    env: {
      RELAYCTL_AGENT_BOOT_ID_FILE: bootFile,
      RELAYCTL_AGENT_REBOOT_COMMAND: command ?? `${rebootScript} "$PPID" '${bootFile}'`,
    },
  };
}

const first = machine("first");
let c: Cluster;

test.before(async () => {
  c = await startCluster({
    serverEnv: { RELAYCTL_REBOOT_TIMEOUT_SECONDS: String(REBOOT_TIMEOUT_SECONDS) },
    agentEnv: first.env,
  });
});
test.after.always(cleanupAll);

const reboot = (body: Record<string, unknown>, key?: string) => api(c, "/reboot", { body, key });

test.serial(
  "reboot - the agent reboots and the operation completes when it is back with a new boot id",
  async (t) => {
    const before = readFileSync(first.bootFile, "utf8").trim();
    const res = await reboot({ server_id: c.serverId, run_id: "r-reboot" });
    t.is(res.status, 202, describe(res));
    t.is(res.json.status, "running", describe(res));
    t.regex(String(res.json.operation_id), UUID, describe(res));
    const id = String(res.json.operation_id);

    await c.agent.proc.exited; // the fake reboot killed it
    const after = readFileSync(first.bootFile, "utf8").trim();
    t.not(after, before);
    const pending = await api(c, `/operations/${id}`);
    t.is(pending.json.status, "running", `still running while the machine is down: ${describe(pending)}`);

    await c.agent.start(); // as systemd would at boot
    const op = await waitForOperationEnd(c, id, 15_000);
    t.is(op.json.status, "completed", describe(op));
    t.is(op.json.operation_type, "reboot", describe(op));
    t.is(op.json.run_id, "r-reboot", describe(op));
    const result = op.json.result as Record<string, unknown>;
    t.is(result.exit_code, 0, describe(op));
    t.is(result.stdout, `rebooted: boot id ${before} -> ${after}\n`, describe(op));
    t.true(Number(result.duration_ms) > 0, describe(op));
    const rows = await c.db.query("SELECT pre_boot_id FROM operations WHERE id = ?", [id]);
    t.is(rows[0]?.pre_boot_id, before);

    // Still one job: the journal keeps a redelivery from rebooting again, and the
    // agent reported no "outcome unknown" failure for the job it died in.
    t.false(c.agent.logText().includes("outcome unknown"));
  },
);

test.serial("reboot - an agent that does not come back in time ends `timeout` at the deadline", async (t) => {
  const server = await c.addServer({ start: false });
  const m = machine(server.serverName);
  const agent = new Agent(server.stateDir, c.dir, m.env);
  await agent.start();
  const res = await reboot({ server_id: server.serverId });
  t.is(res.status, 202, describe(res));
  await agent.proc.exited; // and it is never started again
  const op = await waitForOperationEnd(
    c,
    String(res.json.operation_id),
    (REBOOT_TIMEOUT_SECONDS + 15) * 1000,
  );
  t.is(op.json.status, "timeout", describe(op));
  // No exec grace, told by what was stored rather than by how long it took (a busy machine
  // stretches that): the deadline is the reboot timeout from the start, nothing added, the
  // operation did not end before it, and the sweep that ended it is the one without grace.
  const [row] = await c.db.query(
    "SELECT started_at, deadline_at, completed_at FROM operations WHERE id = ?",
    [op.json.operation_id],
  );
  const [started, deadline, completed] = [row!.started_at, row!.deadline_at, row!.completed_at].map(Number);
  t.true(
    deadline! - started! <= REBOOT_TIMEOUT_SECONDS * 1000,
    `deadline ${deadline! - started!} ms after start`,
  );
  t.true(completed! >= deadline!, `ended ${deadline! - completed!} ms before its deadline`);
  t.regex(
    String((op.json.result as Record<string, unknown>).stderr),
    /^not back \(no new boot id\) by the deadline/,
  );
});

test.serial("reboot - a reboot command that fails ends `failed` with its stderr", async (t) => {
  const server = await c.addServer({ start: false });
  const m = machine(server.serverName, "echo 'Failed to reboot: Access denied' >&2; exit 3");
  const agent = new Agent(server.stateDir, c.dir, m.env);
  await agent.start();
  const res = await reboot({ server_id: server.serverId });
  t.is(res.status, 202, describe(res));
  const op = await waitForOperationEnd(c, String(res.json.operation_id), 15_000);
  t.is(op.json.status, "failed", describe(op));
  const result = op.json.result as Record<string, unknown>;
  t.is(result.exit_code, 3, describe(op));
  t.is(result.stderr, "Failed to reboot: Access denied\n", describe(op));
  t.true(agent.proc.running, "the agent is still up");
  await agent.stop();
});

test.serial("reboot - no provider binding and no connected agent is 409, recorded failed", async (t) => {
  const idle = await c.addServer({ start: false });
  const res = await reboot({ server_id: idle.serverId });
  t.is(res.status, 409, describe(res));
  t.regex(String(res.json.operation_id), UUID, describe(res));
});

test.serial("reboot - unknown server 404, bad body 422", async (t) => {
  assertDetailOnly(t, await reboot({ server_id: "00000000-0000-4000-8000-000000000000" }), 404);
  assertDetailOnly(t, await reboot({}), 422);
  assertDetailOnly(t, await reboot({ server_id: c.serverId, force: true }), 422);
});

test.serial("reboot - a key without the `reboot` operation is 403 and nothing is recorded", async (t) => {
  const apiKey = String(
    (await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ci-reboot"])).key,
  );
  const created = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": apiKey },
    body: { name: "no-reboot", operations: ["exec", "restart"] },
  });
  t.is(created.status, 201, describe(created));
  const res = await reboot({ server_id: c.serverId }, String(created.json.key));
  t.regex(assertDetailOnly(t, res, 403), /reboot/);
  const rows = await c.db.query("SELECT id FROM operations WHERE key_id = ?", [String(created.json.id)]);
  t.is(rows.length, 0);
});

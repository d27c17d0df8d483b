// NATS dies and comes back on the same port: the api, gateway and agent recover by themselves.
import { existsSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { assertCompleted, assertError } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { exec } from "./harness/http";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

test("resilience - exec works again after nats-server is killed and restarted, without restarting anything else", async (t) => {
  const c = await startCluster({ ownNats: true });
  t.teardown(() => c.stop());
  const pids = [c.api.proc.pid, c.gateway.proc.pid, c.agent.proc.pid];
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "echo before", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "before\n",
  });

  const marker = join(makeTempDir("nats-down"), "ran");
  const killedAt = Date.now();
  await c.nats.stop("SIGKILL");
  // While NATS is down an exec answers at once that the bus is unavailable (not a hang, not a
  // 500), and its operation is stored as failed: it was never dispatched.
  const during = await exec(c, { server_id: c.serverId, command: `touch ${marker}`, timeout_seconds: 5 });
  assertError(t, during, 503, "job bus unavailable, retry later");
  const stored = await c.db.query(
    "SELECT status, exit_code, error FROM operations WHERE operation_type = 'exec' AND started_at >= ?",
    [killedAt],
  );
  t.deepEqual(stored, [{ status: "failed", exit_code: -1, error: "job bus unavailable" }]);
  await c.nats.restart();

  const after = await pollUntil(
    async () => {
      const res = await exec(c, { server_id: c.serverId, command: "echo after", timeout_seconds: 5 });
      return res.status === 200 ? res : undefined;
    },
    { what: "an exec to succeed after the NATS restart", timeoutMs: 30_000, intervalMs: 250 },
  );
  assertCompleted(t, after, { exit_code: 0, stdout: "after\n" });
  // Jobs reach the agent in order: had the refused one been sent late, it would have run by now.
  t.false(existsSync(marker), "the command refused while NATS was down must never run");
  t.deepEqual([c.api.proc.pid, c.gateway.proc.pid, c.agent.proc.pid], pids, "no process was restarted");
  t.true(c.api.proc.running && c.gateway.proc.running && c.agent.proc.running, "every process still runs");
});

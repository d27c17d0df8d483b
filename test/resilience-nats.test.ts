// NATS dies and comes back on the same port: the api, gateway and agent recover by themselves.
import test from "ava";
import { assertCompleted, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
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

  await c.nats.stop("SIGKILL");
  // While NATS is down an exec must not hang and must not report success.
  const during = await exec(c, { server_id: c.serverId, command: "echo during", timeout_seconds: 5 });
  t.not(during.status, 200, describe(during));
  await c.nats.restart();

  const after = await pollUntil(
    async () => {
      const res = await exec(c, { server_id: c.serverId, command: "echo after", timeout_seconds: 5 });
      return res.status === 200 ? res : undefined;
    },
    { what: "an exec to succeed after the NATS restart", timeoutMs: 30_000, intervalMs: 250 },
  );
  assertCompleted(t, after, { exit_code: 0, stdout: "after\n" });
  t.deepEqual([c.api.proc.pid, c.gateway.proc.pid, c.agent.proc.pid], pids, "no process was restarted");
  t.true(c.api.proc.running && c.gateway.proc.running && c.agent.proc.running, "every process still runs");
});

// A gateway restart while a command runs: the agent reconnects to the new gateway process on the
// same port, re-sends the result it kept on disk, and the operation completes.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { exec, waitForOperationEnd } from "./harness/http";

test.after.always(cleanupAll);

test("resilience - a command in flight survives a gateway restart", async (t) => {
  const c = await startCluster();
  t.teardown(() => c.stop());
  const res = await exec(c, { server_id: c.serverId, command: "sleep 2; echo done", timeout_seconds: 1 });
  t.is(res.status, 202, describe(res));
  const id = String(res.json.operation_id);

  const mark = c.agent.proc.mark();
  const oldPid = c.gateway.proc.pid;
  await c.gateway.restart("SIGKILL");
  t.not(c.gateway.proc.pid, oldPid);
  t.is(c.gateway.gatewayUrl, `grpc://127.0.0.1:${c.gateway.opts.gatewayPort}`);
  await c.agent.waitForConnected(mark, 20_000);

  const done = await waitForOperationEnd(c, id, 20_000);
  t.like(done.json, {
    operation_id: id,
    status: "completed",
    result: { exit_code: 0, stdout: "done\n", stderr: "" },
  });
  t.true(c.agent.proc.running, "the agent was not restarted");
});

test("resilience - execs work through a restarted gateway", async (t) => {
  const c = await startCluster();
  t.teardown(() => c.stop());
  const mark = c.agent.proc.mark();
  await c.gateway.restart("SIGTERM");
  await c.agent.waitForConnected(mark, 20_000);
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo through-new-gateway",
    timeout_seconds: 30,
  });
  t.is(res.status, 200, describe(res));
  t.is(res.json.stdout, "through-new-gateway\n", describe(res));
});

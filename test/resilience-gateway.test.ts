// A gateway restart while a command runs: the agent reconnects to the new gateway process on the
// same port, re-sends the result it kept on disk, and the operation completes; and how soon it is
// back when the gateway was just there.
import test from "ava";
import { STABLE_STREAM_MS, YOUNG_CAP_MS } from "../agent/src/connection/backoff";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { exec, waitForOperationEnd } from "./harness/http";
import { pollUntil } from "./harness/wait";

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

// The agent's reconnect schedule (agent/src/connection/backoff.ts) at its defaults: after a
// stream that was up a while, a restarted gateway gets its agent back within YOUNG_CAP_MS of
// listening again. On the old schedule (exponential to 15 s, full jitter) an agent that had
// tried six times while the gateway was down slept up to 8-15 s more.
test("resilience - an agent whose gateway was just there is back within the young cap of its restart", async (t) => {
  const c = await startCluster({
    agentEnv: { RELAYCTL_AGENT_BACKOFF_MIN_MS: "250", RELAYCTL_AGENT_BACKOFF_MAX_MS: "15000" },
  });
  t.teardown(() => c.stop());
  const connectedAt = Date.now();
  // The stream must have been up STABLE_STREAM_MS to count as a gateway that was just there;
  // meanwhile execs go through it, each answered once.
  let execs = 0;
  while (Date.now() - connectedAt < STABLE_STREAM_MS + 500) {
    const res = await exec(c, { server_id: c.serverId, command: `echo ${execs}`, timeout_seconds: 30 });
    t.is(res.status, 200, describe(res));
    t.is(res.json.stdout, `${execs++}\n`, describe(res));
  }

  await c.gateway.stop("SIGKILL");
  const outage = c.agent.proc.mark();
  // Down long enough for the old schedule's ceiling to pass the cap many times over.
  const delays = () =>
    c.agent.proc.lines
      .slice(Math.max(0, outage - (c.agent.proc.mark() - c.agent.proc.lines.length)))
      .filter((l) => l.json?.msg === "reconnecting")
      .map((l) => Number(l.json!.delay_ms));
  await pollUntil(() => (delays().length >= 6 ? true : undefined), { timeoutMs: 30_000, what: "6 attempts" });
  t.true(
    delays().every((d) => d >= 250 && d < YOUNG_CAP_MS),
    `every delay of a young outage within [250, ${YOUNG_CAP_MS}): ${delays().join(", ")}`,
  );

  const back = c.agent.proc.mark();
  await c.gateway.start();
  const listening = Date.now();
  await c.agent.waitForConnected(back, 20_000);
  const tookMs = Date.now() - listening;
  t.log(`back ${tookMs} ms after the gateway listened; delays while it was down: ${delays().join(", ")}`);
  // The cap, plus a handshake on a loaded CI machine.
  t.true(tookMs < YOUNG_CAP_MS + 3_000, `back in ${tookMs} ms`);
  const res = await exec(c, { server_id: c.serverId, command: "echo after", timeout_seconds: 30 });
  t.is(res.status, 200, describe(res));
  t.is(res.json.stdout, "after\n", describe(res));
});

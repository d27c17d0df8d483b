// The completion of a job its api waits for (operations/service.ts completeReported): on a
// real cluster (api and gateway processes, NATS, MariaDB, one agent), the gateway hands each
// synchronous exec's result to the waiting api, which commits it in its own tenant queue on
// the head its start left, in one round trip: the gateway commits nothing (its
// relayctl_audit_commits_total stays still), the api's commits all take the guessed way, each
// event names its run, and the chain verifies (admin audit verify). If the api is killed while
// its operation runs (no responder), or stops answering (the hand-over times out), the gateway
// stores the result itself: nothing is lost, the agent is acked, one completion event, and a
// late store by the stopped api moves nothing.
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { pollUntil } from "./harness/wait";

const METRICS_TOKEN = "scrape-token-for-tests-0123456789";

test.after.always(cleanupAll);

/** A process's audit commits by way (guessed, stale, locking). */
async function commits(baseUrl: string): Promise<Record<string, number>> {
  const res = await request({ baseUrl }, "/metrics", { key: METRICS_TOKEN });
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/metrics: ${res.status} ${res.text}`);
  const out: Record<string, number> = { guessed: 0, stale: 0, locking: 0 };
  for (const m of res.text.matchAll(/^relayctl_audit_commits_total\{way="(\w+)"\} (\S+)$/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

const delta = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.keys(a).map((k) => [k, a[k]! - b[k]!]));

test("exec completion - the api that waits stores each completion on its own head in one round trip; the gateway commits none; the chain verifies", async (t) => {
  const c = await startCluster({ serverEnv: { RELAYCTL_METRICS_TOKEN: METRICS_TOKEN } });
  t.teardown(() => c.stop());
  // One exec first: the api's first commit may find no guess yet.
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "true", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "",
  });
  const [gatewayBefore, apiBefore] = [await commits(c.gateway.metricsUrl), await commits(c.api.apiUrl)];
  const runs: (string | null)[] = [null];
  for (let i = 0; i < 10; i++) {
    const runId = i % 2 ? `hint-${randomUUID()}` : null;
    runs.push(runId);
    const res = await exec(c, {
      server_id: c.serverId,
      command: `echo ${i}`,
      ...(runId ? { run_id: runId } : {}),
      timeout_seconds: 30,
    });
    assertCompleted(t, res, { exit_code: 0, stdout: `${i}\n` });
  }
  const gateway = delta(await commits(c.gateway.metricsUrl), gatewayBefore);
  const api = delta(await commits(c.api.apiUrl), apiBefore);
  t.deepEqual(gateway, { guessed: 0, stale: 0, locking: 0 }, "the gateway committed no completion");
  t.deepEqual(
    { stale: api.stale, locking: api.locking },
    { stale: 0, locking: 0 },
    "no guess of the api missed",
  );
  t.true(api.guessed! >= 20, `the api committed 10 starts and 10 completions: ${JSON.stringify(api)}`);
  const events = await c.db.query<{ run_id: string | null; n: number }>(
    `SELECT run_id, COUNT(*) AS n FROM audit_events WHERE tenant_id = ? AND event_type = 'operation.completed'
       GROUP BY run_id`,
    [c.tenantId],
  );
  const runIds = events.flatMap((e) => Array.from({ length: Number(e.n) }, () => e.run_id));
  t.deepEqual(runIds.sort(), [...runs].sort(), "each completion names its operation's run");
  const verify = await c.admin(["audit", "verify", "--tenant", c.tenantId]);
  t.true(verify.ok, `admin audit verify: ${JSON.stringify(verify).slice(0, 500)}`);
});

/** Starts `sleep` + echo through `c.api` and resolves once the agent runs it (acked). */
async function runningExec(c: Cluster, marker: string) {
  const answer = exec(c, { server_id: c.serverId, command: `sleep 2; echo ${marker}`, timeout_seconds: 60 });
  answer.catch(() => {}); // the api may be killed under it
  const op = await pollUntil(
    async () =>
      (
        await c.db.query<{ id: string }>(
          "SELECT id FROM operations WHERE tenant_id = ? AND status = 'running' AND delivery = 'acked'",
          [c.tenantId],
        )
      )[0],
    { timeoutMs: 20_000, what: "the exec acked by the agent" },
  );
  return { id: op.id, answer };
}

/** The operation finished with `marker` as its output, and one completion event for it. */
async function storedOnce(t: import("ava").ExecutionContext, c: Cluster, id: string, marker: string) {
  const row = await pollUntil(
    async () =>
      (
        await c.db.query<{ status: string; stdout: string }>(
          "SELECT status, stdout FROM operations WHERE id = ? AND status <> 'running'",
          [id],
        )
      )[0],
    { timeoutMs: 20_000, what: "the operation stored" },
  );
  t.deepEqual(row, { status: "completed", stdout: `${marker}\n` }, "the agent's result is stored");
  const events = await c.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM audit_events WHERE operation_id = ? AND event_type = 'operation.completed'",
    [id],
  );
  t.is(Number(events[0]!.n), 1, "one completion event");
}

test("exec completion - the waiting api killed while its operation runs: the gateway stores the result itself and acks it; nothing lost; the chain verifies", async (t) => {
  const c = await startCluster({ apis: 2, serverEnv: { RELAYCTL_METRICS_TOKEN: METRICS_TOKEN } });
  t.teardown(() => c.stop());
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "true", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "",
  });
  const { id } = await runningExec(c, "after-kill");
  await c.api.stop("SIGKILL");
  await storedOnce(t, c, id, "after-kill");
  await pollUntil(() => c.gateway.logText().includes("storing it here") || undefined, {
    timeoutMs: 10_000,
    what: "the gateway's fallback logged",
  });
  t.false(
    c.gateway.logText().includes("storing result failed"),
    "the result was stored at once, not re-sent",
  );
  // The agent was acked: its stream stays, and the next exec (through the other api) runs on it.
  const other = { ...c, baseUrl: c.apis[1]!.apiUrl };
  assertCompleted(
    t,
    await exec(other, { server_id: c.serverId, command: "echo next", timeout_seconds: 30 }),
    {
      exit_code: 0,
      stdout: "next\n",
    },
  );
  const verify = await c.admin(["audit", "verify", "--tenant", c.tenantId]);
  t.true(verify.ok, `admin audit verify: ${JSON.stringify(verify).slice(0, 500)}`);
});

test("exec completion - the waiting api stops answering: the gateway stores the result after its timeout; the api's late store moves nothing; the caller gets the result", async (t) => {
  const c = await startCluster({ serverEnv: { RELAYCTL_METRICS_TOKEN: METRICS_TOKEN } });
  t.teardown(() => c.stop());
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "true", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "",
  });
  const { id, answer } = await runningExec(c, "after-stop");
  c.api.proc.signal("SIGSTOP");
  try {
    await storedOnce(t, c, id, "after-stop");
  } finally {
    c.api.proc.signal("SIGCONT");
  }
  // The api wakes with the hand-over still queued: its store finds the row finished (no second event).
  assertCompleted(t, await answer, { exit_code: 0, stdout: "after-stop\n" });
  await storedOnce(t, c, id, "after-stop");
  t.true(c.gateway.logText().includes("storing it here"), "the gateway stored it after its timeout");
  const verify = await c.admin(["audit", "verify", "--tenant", c.tenantId]);
  t.true(verify.ok, `admin audit verify: ${JSON.stringify(verify).slice(0, 500)}`);
});

// An agent that dies mid-command: the operation ends `failed` once its lease runs out
// (SHORT_LEASE: RELAYCTL_LEASE_MS=3000), and never stays `running`.
import { readFileSync } from "node:fs";
import test from "ava";
import { ISO_UTC, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { SHORT_LEASE } from "./harness/control-plane";
import { exec, getOperation, waitForOperationEnd } from "./harness/http";
import { descendants } from "./harness/proctree";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

test("resilience - an agent killed during a running exec leaves the operation failed, not running", async (t) => {
  const c = await startCluster({ serverEnv: SHORT_LEASE });
  t.teardown(() => c.stop());
  const res = await exec(c, { server_id: c.serverId, command: "sleep 30; echo never", timeout_seconds: 1 });
  t.is(res.status, 202, describe(res));
  const id = String(res.json.operation_id);
  // The command really is running on the agent (its shell is a child of the agent).
  const op = await getOperation(c, id);
  t.is(op.json.status, "running", describe(op));
  await pollUntil(() => (c.agent.proc.running && hasSleepChild(c.agent.proc.pid) ? true : undefined), {
    what: "the agent to run sleep 30",
    timeoutMs: 10_000,
  });

  await c.agent.kill("SIGKILL");
  const killedAt = Date.now();
  // Lease 3 s + sweep 0.25 s; the bound leaves room for a slow machine, not for "forever".
  const ended = await waitForOperationEnd(c, id, 15_000);
  const tookMs = Date.now() - killedAt;
  t.is(ended.json.status, "failed", describe(ended));
  t.is(ended.json.operation_id, id);
  t.regex(String(ended.json.completed_at), ISO_UTC, describe(ended));
  t.log(`failed ${tookMs} ms after the kill`);
});

function hasSleepChild(pid: number): boolean {
  return descendants(pid).some((p) => {
    try {
      return readFileSync(`/proc/${p}/cmdline`, "utf8").includes("sleep");
    } catch {
      return false;
    }
  });
}

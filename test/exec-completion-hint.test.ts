// The gateway as the one writer of an exec's audit events: on a real cluster
// (api and gateway processes, NATS, MariaDB, one agent), the api sends each
// exec's start with its job (bus/job-start.ts) and the gateway commits it, then
// the completion with the row's facts the api told (bus/job-hint.ts). Execs one
// after the other commit every start and completion in one round trip on the
// head the gateway's previous commit left (its relayctl_audit_commits_total),
// with the run each event names, and the chain verifies (admin audit verify).
import { randomUUID } from "node:crypto";
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";

const METRICS_TOKEN = "scrape-token-for-tests-0123456789";

test.after.always(cleanupAll);

/** The gateway's audit commits by way (guessed, stale, locking). */
async function commits(baseUrl: string): Promise<Record<string, number>> {
  const res = await request({ baseUrl }, "/metrics", { key: METRICS_TOKEN });
  if (res.status !== 200) throw new Error(`GET ${baseUrl}/metrics: ${res.status} ${res.text}`);
  const out: Record<string, number> = { guessed: 0, stale: 0, locking: 0 };
  for (const m of res.text.matchAll(/^relayctl_audit_commits_total\{way="(\w+)"\} (\S+)$/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

test("exec completion - the gateway commits each exec's start and completion in one round trip on its own head; the chain verifies", async (t) => {
  const c = await startCluster({ serverEnv: { RELAYCTL_METRICS_TOKEN: METRICS_TOKEN } });
  t.teardown(() => c.stop());
  const before = await commits(c.gateway.metricsUrl);
  const runs: (string | null)[] = [];
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
  const after = await commits(c.gateway.metricsUrl);
  // The first start may take the locking way: the gateway has no head of the tenant before it.
  const guessed = after.guessed! - before.guessed!;
  t.true(
    guessed >= 19 && guessed <= 20,
    `every start and completion but the first on the gateway's head: ${guessed}`,
  );
  t.is(after.stale! - before.stale!, 0, "none missed");
  const starts = await c.db.query<{ n: number }>(
    "SELECT COUNT(*) AS n FROM audit_events WHERE tenant_id = ? AND event_type = 'operation.exec'",
    [c.tenantId],
  );
  t.is(Number(starts[0]!.n), 10, "one start event per exec");
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

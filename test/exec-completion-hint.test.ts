// The gateway's completion on the head the api told it (bus/job-hint.ts): on a
// real cluster (api and gateway processes, NATS, MariaDB, one agent), execs one
// after the other commit every completion in one round trip on the head the
// api's start left (the gateway's relayctl_audit_commits_total), with the run
// each event names, and the chain verifies (admin audit verify).
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

test("exec completion - told the api's chain head and the row's facts, the gateway commits each completion on it in one round trip; the chain verifies", async (t) => {
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
  t.deepEqual(
    { guessed: after.guessed! - before.guessed!, stale: after.stale! - before.stale! },
    { guessed: 10, stale: 0 },
    "every completion on the told head, none missed",
  );
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

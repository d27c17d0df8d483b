// Several gateways sweep at once, and each expired operation is finished exactly
// once: the sweeper claims rows with a conditional UPDATE. A trigger in the test's
// database records every write to a finished operation row, so a second finish
// (one sweeper overwriting the other's result) shows in stored state.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { startControlPlane } from "./harness/control-plane";
import { api, waitForOperationEnd } from "./harness/http";

test.after.always(cleanupAll);

test("sweeper - two gateways sweeping end each overdue operation once, as timeout", async (t) => {
  const timing = { RELAYCTL_REBOOT_TIMEOUT_SECONDS: "2", RELAYCTL_SWEEP_INTERVAL_MS: "100" };
  // The agent "reboots" with a command that does nothing: it never comes back
  // with a new boot id, so only the sweepers can end these operations.
  const c = await startCluster({ serverEnv: timing, agentEnv: { RELAYCTL_AGENT_REBOOT_COMMAND: "true" } });
  const second = await startControlPlane({
    role: "gateway",
    databaseUrl: c.db.url,
    natsUrl: c.nats.url,
    dir: c.dir,
    env: timing,
  });
  t.teardown(() => second.stop());
  await c.db.query(
    "CREATE TABLE finish_writes (operation_id VARCHAR(36) NOT NULL, status VARCHAR(32) NOT NULL)",
  );
  // Fires for every row an UPDATE matches, changed or not: a claim that lost (WHERE status =
  // 'running' matched nothing) leaves no trace, an unconditional second finish leaves a second row.
  await c.db.query(
    `CREATE TRIGGER record_finish AFTER UPDATE ON operations FOR EACH ROW
       IF NEW.status <> 'running' THEN
         INSERT INTO finish_writes (operation_id, status) VALUES (NEW.id, NEW.status);
       END IF`,
  );

  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await api(c, "/reboot", { method: "POST", body: { server_id: c.serverId } });
    t.is(res.status, 202, describe(res));
    ids.push(String(res.json.operation_id));
  }
  const reason = "not back (no new boot id) by the deadline";
  for (const id of ids) {
    const end = await waitForOperationEnd(c, id, 30_000);
    t.is(end.json.status, "timeout", describe(end));
    t.is(end.json.error, reason, describe(end));
  }
  // A losing sweeper would write right after the winner. One more reboot, ended by the sweepers
  // a deadline later, means both have swept many times since: any second write has happened.
  const sentinel = await api(c, "/reboot", { method: "POST", body: { server_id: c.serverId } });
  t.is(sentinel.status, 202, describe(sentinel));
  const sentinelEnd = await waitForOperationEnd(c, String(sentinel.json.operation_id), 30_000);
  t.is(sentinelEnd.json.status, "timeout", describe(sentinelEnd));
  const placeholders = ids.map(() => "?").join(",");
  const rows = await c.db.query<{
    id: string;
    status: string;
    exit_code: number;
    error: string;
    delivery: string;
  }>(
    `SELECT id, status, exit_code, error, delivery, completed_at >= deadline_at AS after_deadline
       FROM operations WHERE id IN (${placeholders}) ORDER BY id`,
    ids,
  );
  t.deepEqual(
    rows,
    [...ids].sort().map((id) => ({
      id,
      status: "timeout",
      exit_code: -1,
      error: reason,
      delivery: "finished",
      after_deadline: 1,
    })),
  );
  const writes = await c.db.query(
    `SELECT operation_id, COUNT(*) AS n FROM finish_writes WHERE operation_id IN (${placeholders})
       GROUP BY operation_id ORDER BY operation_id`,
    ids,
  );
  t.deepEqual(
    writes,
    [...ids].sort().map((id) => ({ operation_id: id, n: 1 })),
    "each operation finished by exactly one write",
  );
});

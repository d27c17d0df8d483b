// MariaDB down for longer than a lease while a command runs: the agent can neither renew the
// lease (heartbeats are not stored) nor report the result (the gateway cannot store it, drops
// the stream, and turns reconnects away). Once MariaDB is back the agent reconnects and re-sends
// the result; the operation must end completed with it, not be swept as "agent lost" first
// (seen in test/chaos.test.ts before the sweeper paused after a failed sweep).
import { existsSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { SHORT_LEASE } from "./harness/control-plane";
import { exec, waitForOperationEnd } from "./harness/http";
import { startOwned } from "./harness/mariadb";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const LEASE_MS = Number(SHORT_LEASE.RELAYCTL_LEASE_MS);

test("resilience - a command that ends while MariaDB is down past its lease completes, not swept as agent lost", async (t) => {
  const mariadb = await startOwned();
  const c = await startCluster({ mariadb, serverEnv: SHORT_LEASE });
  t.teardown(() => c.stop());
  const marker = join(makeTempDir("resilience-mariadb"), "finished");
  const res = await exec(c, {
    server_id: c.serverId,
    command: `sleep 2; touch ${marker}; echo done`,
    timeout_seconds: 1,
  });
  t.is(res.status, 202, describe(res));
  const id = String(res.json.operation_id);

  const downAt = Date.now();
  await mariadb.stop("SIGKILL");
  await pollUntil(() => existsSync(marker) || undefined, { what: "the command to end", timeoutMs: 10_000 });
  // Down until a sweep has failed two leases after the kill: the lease has long run out.
  await c.gateway.proc.waitForLine(
    (l) =>
      l.json?.msg === "sweep failed; will retry" && Date.parse(String(l.json.time)) > downAt + 2 * LEASE_MS,
    { what: "a failed sweep two leases into the outage", timeoutMs: 30_000 },
  );
  await mariadb.start();

  const done = await waitForOperationEnd(c, id, 30_000);
  t.like(done.json, { status: "completed", result: { exit_code: 0, stdout: "done\n" } }, describe(done));
});

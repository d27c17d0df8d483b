// Several gateways sweep at once, and each expired operation is finished exactly
// once: the sweeper claims rows with a conditional UPDATE.
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { startControlPlane } from "./harness/control-plane";
import { api, waitForOperationEnd } from "./harness/http";
import { freePort } from "./harness/ports";

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
    gatewayPort: await freePort(),
    dir: c.dir,
    env: timing,
  });
  t.teardown(() => second.stop());

  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const res = await api(c, "/reboot", { method: "POST", body: { server_id: c.serverId } });
    t.is(res.status, 202, describe(res));
    ids.push(String(res.json.operation_id));
  }
  for (const id of ids) {
    const end = await waitForOperationEnd(c, id, 30_000);
    t.is(end.json.status, "timeout", describe(end));
  }
  const logs = `${c.gateway.logText()}\n${second.logText()}`;
  for (const id of ids) {
    const swept = logs.split("\n").filter((l) => l.includes('"operation swept"') && l.includes(id));
    t.is(swept.length, 1, `operation ${id} swept ${swept.length} times`);
  }
});

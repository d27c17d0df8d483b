// A Hello the gateway cannot store (its database connection lost at that write, as in a
// reconnect storm where a new pooled connection timed out) ends the agent's stream at once with
// UNAVAILABLE, and the agent dials again on its schedule and is welcomed. Before, the stream
// stayed open with no Welcome, and the agent waited out its own Welcome timeout (15 s); a
// simulated fleet without that timeout (bench/agent-fanin.mjs) waited for ever.
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { startDbLink } from "./harness/db-link";
import { exec } from "./harness/http";
import { sharedMariaDb } from "./harness/mariadb";

test.after.always(cleanupAll);

test("gateway hello - a Hello not stored ends the stream with UNAVAILABLE; the agent dials again and is welcomed", async (t) => {
  const link = await startDbLink(await sharedMariaDb());
  const c = await startCluster({ mariadb: link.server });
  // The Hello's write (agent-stream.ts, the batch of Hellos): the connection carrying it is cut.
  const cut = link.cutAt("update `servers` set `boot_id`");
  // Resolves once the new agent logged "connected" (a Welcome).
  const server = await c.addServer({ start: true, name: "hello-cut" });
  await cut;
  const log = server.agent!.logText();
  const ended = log
    .split("\n")
    .filter((l) => l.includes('"msg":"stream ended"'))
    .map((l) => JSON.parse(l).err);
  t.deepEqual(ended, ["14 UNAVAILABLE: control plane database unavailable, retry"]);
  t.notRegex(log, /no Welcome from gateway/, "the agent did not wait out its Welcome timeout");
  assertCompleted(
    t,
    await exec(c, { server_id: server.serverId, command: "echo welcomed", timeout_seconds: 30 }),
    { exit_code: 0, stdout: "welcomed\n" },
  );
});

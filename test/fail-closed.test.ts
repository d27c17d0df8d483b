// No unaudited operation, ever: when the database cannot take the operation row
// and its audit event, the call fails with 503 and nothing is dispatched. When
// the database is back, the same processes work again.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { assertCompleted, assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { exec } from "./harness/http";
import { startOwned } from "./harness/mariadb";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

test("fail closed - exec with the database down is 503 and runs nothing; it recovers when the database is back", async (t) => {
  const mariadb = await startOwned();
  const c = await startCluster({ mariadb });
  const dir = mkdtempSync(join(tmpdir(), "relayctl-fail-closed-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const marker = join(dir, "ran");

  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "echo up", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "up\n",
  });

  await mariadb.stop("SIGKILL");
  const started = Date.now();
  const refused = await exec(c, { server_id: c.serverId, command: `touch ${marker}`, timeout_seconds: 30 });
  t.log(`answered ${refused.status} in ${Date.now() - started} ms`);
  // Auth reads the database too, so the refusal can come from there or from the
  // audited write; either way it is a 503, never a 5xx of another kind or a hang.
  t.regex(assertDetailOnly(t, refused, 503), /database unavailable/);

  await mariadb.start();
  // The same api, gateway and agent recover; jobs reach the agent in order, so
  // once this one has run, the refused one would have run before it if sent.
  const after = await pollUntil(
    async () => {
      const res = await exec(c, { server_id: c.serverId, command: "echo back", timeout_seconds: 30 });
      return res.status === 200 ? res : undefined;
    },
    { what: "exec to work again after the database restart", timeoutMs: 60_000, intervalMs: 250 },
  );
  assertCompleted(t, after, { exit_code: 0, stdout: "back\n" });
  t.false(existsSync(marker), "the refused command must never have run");
});

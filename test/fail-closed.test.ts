// No unaudited operation, ever: when the database cannot take the operation row
// and its audit event, the call fails with 503 and nothing is dispatched. An
// exec's start goes with its job and the gateway commits it (bus/job-start.ts);
// when the gateway cannot, it refuses the job and the api commits the same start
// itself: a lost connection there runs the command once, never unaudited. When
// the database is back, the same processes work again. The first test makes only
// that write fail (authentication and rate limiting did read the database), so the
// refusal can only come from the audited write; the second takes the whole
// database down.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import { assertCompleted, assertError } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { startDbLink } from "./harness/db-link";
import { exec } from "./harness/http";
import { sharedMariaDb, startOwned } from "./harness/mariadb";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const STORE_UNAVAILABLE = "database unavailable: nothing was run, retry later";

/** A path in a temp dir removed after the test: a refused command that ran would create it. */
function witness(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-fail-closed-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "ran");
}

/** The cluster runs a command before anything is cut. */
async function assertUp(t: ExecutionContext, c: Cluster): Promise<void> {
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "echo up", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "up\n",
  });
}

test("fail closed - a connection lost at the audit write is 503, stores no operation and runs nothing", async (t) => {
  const link = await startDbLink(await sharedMariaDb());
  const c = await startCluster({ mariadb: link.server });
  const marker = witness(t);
  await assertUp(t, c);
  const count = async (table: string) =>
    Number((await c.db.query(`SELECT COUNT(*) AS n FROM \`${table}\``))[0]!.n);
  const before = { operations: await count("operations"), audit: await count("audit_events") };

  // The operation row is already inserted in the transaction when its audit event is sent:
  // cutting there also proves the two are committed together or not at all. Two cuts: the
  // gateway's commit of the start it got with the job (bus/job-start.ts), which refuses the job,
  // then the api's own commit of the same start.
  const cut = link.cutTimes("insert into `audit_events`", 2);
  const refused = await exec(c, { server_id: c.serverId, command: `touch ${marker}`, timeout_seconds: 30 });
  await cut;
  assertError(t, refused, 503, STORE_UNAVAILABLE);
  t.deepEqual(
    { operations: await count("operations"), audit: await count("audit_events") },
    before,
    "neither the operation row nor its audit event was stored",
  );

  // The same processes go on; jobs reach the agent in order, so once this one has run,
  // the refused one would have run before it had it been sent.
  const after = await pollUntil(
    async () => {
      const res = await exec(c, { server_id: c.serverId, command: "echo back", timeout_seconds: 30 });
      return res.status === 200 ? res : undefined;
    },
    { what: "exec to work again after the lost connection", timeoutMs: 30_000, intervalMs: 100 },
  );
  assertCompleted(t, after, { exit_code: 0, stdout: "back\n" });
  t.false(existsSync(marker), "the refused command must never have run");
});

test("fail closed - the gateway's commit of an exec's start lost: it runs nothing, the api commits the same start and the command runs once", async (t) => {
  const link = await startDbLink(await sharedMariaDb());
  const c = await startCluster({ mariadb: link.server });
  const marker = witness(t);
  await assertUp(t, c);
  // The next audited insert is the gateway's commit of the start that came with the job.
  const cut = link.cutAt("insert into `audit_events`");
  const res = await exec(c, {
    server_id: c.serverId,
    command: `echo once >> ${marker}`,
    timeout_seconds: 30,
  });
  await cut;
  assertCompleted(t, res, { exit_code: 0, stdout: "" });
  const id = String(res.json.operation_id);
  t.regex(c.logText(), /operation start not committed; job refused/, "the gateway refused the job");
  const events = await c.db.query<{ event_type: string }>(
    "SELECT event_type FROM audit_events WHERE operation_id = ? ORDER BY seq",
    [id],
  );
  t.deepEqual(
    events.map((e) => e.event_type),
    ["operation.exec", "operation.completed"],
    "one start, committed by the api, and its completion",
  );
  const rows = await c.db.query<{ status: string }>("SELECT status FROM operations WHERE id = ?", [id]);
  t.deepEqual(
    rows.map((r) => r.status),
    ["completed"],
  );
  t.is(readFileSync(marker, "utf8"), "once\n", "the command ran exactly once");
  const verify = await c.admin(["audit", "verify", "--tenant", c.tenantId]);
  t.true(verify.ok, `admin audit verify: ${JSON.stringify(verify).slice(0, 500)}`);
});

test("fail closed - exec with the database down is 503 and runs nothing; it recovers when the database is back", async (t) => {
  const mariadb = await startOwned();
  const c = await startCluster({ mariadb });
  const marker = witness(t);

  await assertUp(t, c);

  await mariadb.stop("SIGKILL");
  const started = Date.now();
  const refused = await exec(c, { server_id: c.serverId, command: `touch ${marker}`, timeout_seconds: 30 });
  t.log(`answered ${refused.status} in ${Date.now() - started} ms`);
  // Auth reads the database too, so this refusal may come from there (the test above
  // reaches the audited write); either way it is this 503, never a 500 or a hang.
  assertError(t, refused, 503, STORE_UNAVAILABLE);

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

test("fail closed - a write the database refuses for another reason is a 500 with its cause logged, not a 503, and runs nothing", async (t) => {
  const c = await startCluster();
  const marker = witness(t);
  // Not an outage: the database answers, and refuses this one statement (a bug looks like this).
  await c.db.query(
    "CREATE TRIGGER refuse_operations BEFORE INSERT ON `operations` FOR EACH ROW " +
      "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the fail-closed test'",
  );
  const count = async (table: string) =>
    Number((await c.db.query(`SELECT COUNT(*) AS n FROM \`${table}\``))[0]!.n);
  const before = { operations: await count("operations"), audit: await count("audit_events") };
  const refused = await exec(c, { server_id: c.serverId, command: `touch ${marker}`, timeout_seconds: 30 });
  assertError(t, refused, 500, "internal error");
  t.deepEqual({ operations: await count("operations"), audit: await count("audit_events") }, before);
  await pollUntil(async () => c.logText().includes("refused by the fail-closed test") || undefined, {
    what: "the cause in the control plane's log",
    timeoutMs: 10_000,
    intervalMs: 100,
  });

  await c.db.query("DROP TRIGGER refuse_operations");
  assertCompleted(t, await exec(c, { server_id: c.serverId, command: "echo back", timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "back\n",
  });
  t.false(existsSync(marker), "the refused command must never have run");
});

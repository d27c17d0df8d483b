// Group commit of audited writes (control-plane/src/audit/group-commit.ts), on a real MariaDB:
// operations started and finished all at once, from two "instances" (two connection pools, each
// with its own batcher) sharing one tenant's chain, lose nothing — each operation has exactly one
// start and one completion event — and the chain verifies; a write that fails inside a batch
// fails alone; and after the database is killed in the middle of such a load, every write that
// was answered is there and the chain still verifies. Commits on a guessed chain head:
// audit-group-commit-guess.test.ts.
import { randomUUID } from "node:crypto";
import { DeployReport } from "@relayctl/proto";
import test from "ava";
import { commitAudited } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { createTenant } from "../control-plane/src/cli/admin";
import { openDb } from "../control-plane/src/db/knex";
import { finishOperation } from "../control-plane/src/operations/finish";
import { markAcked, renewLeases } from "../control-plane/src/operations/store";
import {
  done,
  eventCounts,
  inFreshDatabase,
  inTwoInstances,
  ownedAuditDatabase,
  setup,
  start,
} from "./harness/group-commit";

const { keys, server } = ownedAuditDatabase(test);

test.serial(
  "group commit - concurrent starts and finishes from two instances: nothing lost, one event each, chain verifies",
  async (t) =>
    inTwoInstances(server(), async (a, b, tenantId, serverId) => {
      const N = 200;
      const started = await Promise.all(
        Array.from({ length: N }, (_, i) => start(i % 2 ? a : b, tenantId, serverId)),
      );
      // Each finish raced by a duplicate report from the other instance: exactly one wins.
      const wins = await Promise.all(
        started.flatMap(({ id }, i) => [
          finishOperation(i % 2 ? a : b, id, done, serverId),
          finishOperation(i % 2 ? b : a, id, done, serverId, tenantId),
        ]),
      );
      t.is(wins.filter(Boolean).length, N, "exactly one finish per operation won");
      const ops = await a("operations")
        .where({ tenant_id: tenantId, status: "completed" })
        .count({ n: "*" })
        .first();
      t.is(Number(ops?.n), N);
      const per = await eventCounts(a, tenantId);
      t.is(per.size, N);
      for (const { id } of started) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      const report = await verifyTenantChain(a, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 2 * N);
    }),
);

test.serial(
  "group commit - a write that fails in a batch fails alone; the others commit with their events",
  async (t) => {
    const info = await server().createDatabase();
    const db = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(db);
      const results = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) =>
          commitAudited(db, tenantId, async (trx) => {
            // Write 7 breaks a constraint (no such server): the whole batch is rolled back first.
            await trx("operations").insert({
              id: randomUUID(),
              tenant_id: tenantId,
              server_id: i === 7 ? randomUUID() : serverId,
              operation_type: "exec",
              status: "running",
              delivery: "pending",
              started_at: Date.now(),
              deadline_at: Date.now() + 1000,
            });
            return { event: { tenantId, eventType: "test.write", serverId, payload: { i } }, value: i };
          }),
        ),
      );
      t.deepEqual(
        results.map((r) => r.status),
        Array.from({ length: 30 }, (_, i) => (i === 7 ? "rejected" : "fulfilled")),
      );
      const events = await db("audit_events")
        .where({ tenant_id: tenantId, event_type: "test.write" })
        .select("payload");
      t.deepEqual(
        events.map((e) => JSON.parse(e.payload).i).sort((x: number, y: number) => x - y),
        Array.from({ length: 30 }, (_, i) => i).filter((i) => i !== 7),
      );
      const rows = await db("operations").where({ tenant_id: tenantId }).count({ n: "*" }).first();
      t.is(Number(rows?.n), 29);
      t.true((await verifyTenantChain(db, tenantId, keys)).ok);
    } finally {
      await db.destroy();
    }
  },
);

test.serial(
  "group commit - database killed under load: every answered write is there and the chain verifies",
  async (t) => {
    const info = await server().createDatabase();
    let db = openDb(info.url);
    const { tenantId, serverId } = await setup(db);
    const answered: string[] = [];
    let failed = 0;
    let stop = false;
    const worker = async () => {
      while (!stop) {
        try {
          answered.push((await start(db, tenantId, serverId)).id);
        } catch {
          failed++;
          return;
        }
      }
    };
    const load = Promise.all(Array.from({ length: 16 }, worker));
    // Kill it once some batches have committed, while writes are in flight.
    const deadline = Date.now() + 30_000;
    while (answered.length < 100 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await server().stop("SIGKILL");
    stop = true;
    await load;
    await db.destroy();
    await server().start();
    db = openDb(info.url);
    try {
      t.true(answered.length >= 100, `answered ${answered.length}`);
      t.true(failed > 0, "writes in flight at the kill failed (not answered as done)");
      const per = await eventCounts(db, tenantId);
      const rows = new Set(
        (await db("operations").where({ tenant_id: tenantId }).select("id")).map((r) => r.id as string),
      );
      for (const id of answered) {
        t.true(rows.has(id), `answered operation ${id} has its row`);
        t.deepEqual(per.get(id), ["operation.exec"], `answered operation ${id} has its event`);
      }
      // Nothing half-written: every stored operation has its event, and no event lacks its row.
      t.is(per.size, rows.size);
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
    } finally {
      await db.destroy();
    }
  },
);

test.serial(
  "group commit - operations started together in one bulk insert: a bad one fails alone, the others commit with their events",
  async (t) =>
    inFreshDatabase(server(), async (db, tenantId, serverId) => {
      // Queued while the first transaction is in flight, the other 39 go in one bulk batch;
      // number 17 names a server that does not exist (a foreign key): the batch rolls back
      // and each start is retried alone.
      const results = await Promise.allSettled(
        Array.from({ length: 40 }, (_, i) => start(db, tenantId, i === 17 ? randomUUID() : serverId)),
      );
      t.deepEqual(
        results.map((r) => r.status),
        Array.from({ length: 40 }, (_, i) => (i === 17 ? "rejected" : "fulfilled")),
      );
      const ids = results.flatMap((r) => (r.status === "fulfilled" ? [r.value.id] : []));
      const rows = await db("operations").where({ tenant_id: tenantId }).select("id");
      t.deepEqual(rows.map((r) => r.id as string).sort(), [...ids].sort());
      const per = await eventCounts(db, tenantId);
      t.is(per.size, 39);
      for (const id of ids) t.deepEqual(per.get(id), ["operation.exec"], id);
      t.true((await verifyTenantChain(db, tenantId, keys)).ok);
    }),
);

test.serial(
  "group commit - a report of another server or tenant in the same batch moves nothing: the row and its one event are the right report's",
  async (t) =>
    inFreshDatabase(server(), async (db, tenantId, serverId) => {
      const other = await createTenant(db, `o-${randomUUID().slice(0, 8)}`);
      const N = 30;
      const started = await Promise.all(Array.from({ length: N }, () => start(db, tenantId, serverId)));
      const wrong = { ...done, exit_code: 7, stdout: "forged" };
      const right = (i: number) => ({ ...done, stdout: `right ${i}` });
      // One process, so these share batches: for each operation a report from a stream of another
      // server and one naming another tenant come first, then the right one. The rows are updated
      // before the chain head is locked (early writes): their conditions must be plan's.
      const answers = await Promise.all(
        started.flatMap(({ id }, i) => [
          finishOperation(db, id, wrong, randomUUID(), tenantId),
          finishOperation(db, id, wrong, serverId, other.tenant_id),
          finishOperation(db, id, right(i), serverId, tenantId),
        ]),
      );
      const rows = await db("operations")
        .whereIn(
          "id",
          started.map((s) => s.id),
        )
        .select("id", "status", "exit_code", "stdout");
      const byId = new Map(rows.map((r) => [r.id, r]));
      started.forEach(({ id }, i) => {
        t.deepEqual(
          answers.slice(3 * i, 3 * i + 3).map((a) => a !== null),
          [false, false, true],
          `operation ${i}: only the right report won`,
        );
        t.like(byId.get(id), { status: "completed", exit_code: 0, stdout: `right ${i}` });
      });
      const per = await eventCounts(db, tenantId);
      for (const { id } of started) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      t.is((await eventCounts(db, other.tenant_id)).size, 0, "nothing in the other tenant's chain");
      // The completion events' result hashes are checked against the stored results.
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
    }),
);

test.serial(
  "group commit - reports of one operation in the same batch, bulk and one by one (a deploy's): exactly one wins",
  async (t) =>
    inFreshDatabase(server(), async (db, tenantId, serverId) => {
      const N = 60;
      const started = await Promise.all(Array.from({ length: N }, () => start(db, tenantId, serverId)));
      const deployReport = {
        status: "failed" as const,
        exit_code: 1,
        stdout: "",
        stderr: "health_check: never answered",
        duration_ms: 5,
        detail: {
          $case: "deploy" as const,
          deploy: DeployReport.fromPartial({ failedStep: "health_check" }),
        },
      };
      // One process, so all of these share batches: a plain report twice (both bulk) and a
      // deploy report (written on its own, between bulk runs) for every operation.
      const wins = await Promise.all(
        started.flatMap(({ id }, i) => [
          finishOperation(db, id, done, serverId, tenantId),
          finishOperation(db, id, i % 3 ? done : deployReport, serverId, tenantId),
          finishOperation(db, id, done, serverId, tenantId),
        ]),
      );
      for (let i = 0; i < N; i++)
        t.is(wins.slice(3 * i, 3 * i + 3).filter(Boolean).length, 1, `operation ${i}: one report won`);
      const per = await eventCounts(db, tenantId);
      for (const { id } of started) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      const finished = await db("operations")
        .where({ tenant_id: tenantId, status: "running" })
        .count({ n: "*" });
      t.is(Number(finished[0]?.n), 0);
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 2 * N);
    }),
);

test.serial(
  "group commit - finishes racing acks and lease renewals of the same rows (other lock orders) all land",
  async (t) => {
    const info = await server().createDatabase();
    const db = openDb(info.url);
    const other = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(db);
      const N = 300;
      const started = await Promise.all(Array.from({ length: N }, () => start(db, tenantId, serverId)));
      const ids = started.map((s) => s.id);
      // What a gateway does beside the results: acks and lease renewals lock these rows through
      // the server's index, in another order than a batch's locking read by id. A batch that
      // loses such a deadlock is run again; no finish may fail for it.
      let racing = true;
      const racers = Array.from({ length: 4 }, async () => {
        while (racing) {
          const some = ids.filter(() => Math.random() < 0.3);
          await Promise.all([
            markAcked(other, serverId, some).catch(() => undefined),
            renewLeases(other, serverId, some, 60_000).catch(() => undefined),
          ]);
        }
      });
      const wins = await Promise.all(ids.map((id) => finishOperation(db, id, done, serverId, tenantId)));
      racing = false;
      await Promise.all(racers);
      t.is(wins.filter(Boolean).length, N, "every finish stored");
      const per = await eventCounts(db, tenantId);
      for (const id of ids) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      t.true((await verifyTenantChain(db, tenantId, keys)).ok);
    } finally {
      await db.destroy();
      await other.destroy();
    }
  },
);

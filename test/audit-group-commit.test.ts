// Group commit of audited writes (control-plane/src/audit/group-commit.ts), on a real MariaDB:
// operations started and finished all at once, from two "instances" (two connection pools, each
// with its own batcher) sharing one tenant's chain, lose nothing — each operation has exactly one
// start and one completion event — and the chain verifies; a write that fails inside a batch
// fails alone; and after the database is killed in the middle of such a load, every write that
// was answered is there and the chain still verifies. Operations started on a guessed chain
// head (noteChainHead: what an automation key's admission reads) commit in one round trip, and
// a stale guess, also under two instances racing, never forks the chain.
import { randomBytes, randomUUID } from "node:crypto";
import { DeployReport } from "@relayctl/proto";
import test from "ava";
import type { Knex } from "knex";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { commitAudited, guessStats, noteChainHead } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { createTenant } from "../control-plane/src/cli/admin";
import { migrate, openDb } from "../control-plane/src/db/knex";
import {
  type KnownOperation,
  createOperation,
  finishOperation,
  markAcked,
  renewLeases,
} from "../control-plane/src/operations/store";
import { cleanupAll } from "./harness/cleanup";
import { type OwnedMariaDbServer, startOwned } from "./harness/mariadb";

let server: OwnedMariaDbServer;
const keys = resolveAuditKeys({ databaseUrl: "mysql://", auditHmacKey: randomBytes(32).toString("base64") })!;
test.before(async () => {
  useAuditKeys(keys);
  server = await startOwned();
});
test.after.always(cleanupAll);

async function setup(db: Knex) {
  await migrate(db);
  const tenant = await createTenant(db, `t-${randomUUID().slice(0, 8)}`);
  const serverId = randomUUID();
  await db("servers").insert({
    id: serverId,
    tenant_id: tenant.tenant_id,
    name: "s1",
    created_at: Date.now(),
  });
  return { tenantId: tenant.tenant_id, serverId };
}

/** A fresh database with a tenant and a server, given to `body`, closed afterwards. */
async function inFreshDatabase(body: (db: Knex, tenantId: string, serverId: string) => Promise<void>) {
  const db = openDb((await server.createDatabase()).url);
  try {
    const { tenantId, serverId } = await setup(db);
    await body(db, tenantId, serverId);
  } finally {
    await db.destroy();
  }
}

const start = (db: Knex, tenantId: string, serverId: string) =>
  createOperation(db, {
    tenantId,
    serverId,
    operationType: "exec",
    keyId: null,
    runId: null,
    leaseMs: 60_000,
    deadlineAt: Date.now() + 60_000,
    audit: { command: "true" },
  });

const done = { status: "completed" as const, exit_code: 0, stdout: "ok", stderr: "", duration_ms: 1 };

async function eventCounts(db: Knex, tenantId: string) {
  const rows = await db("audit_events")
    .where({ tenant_id: tenantId })
    .select("operation_id", "event_type")
    .whereNotNull("operation_id");
  const per = new Map<string, string[]>();
  for (const r of rows) per.set(r.operation_id, [...(per.get(r.operation_id) ?? []), r.event_type].sort());
  return per;
}

test.serial(
  "group commit - concurrent starts and finishes from two instances: nothing lost, one event each, chain verifies",
  async (t) => {
    const info = await server.createDatabase();
    const a = openDb(info.url);
    const b = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(a);
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
    } finally {
      await a.destroy();
      await b.destroy();
    }
  },
);

test.serial(
  "group commit - a write that fails in a batch fails alone; the others commit with their events",
  async (t) => {
    const info = await server.createDatabase();
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
    const info = await server.createDatabase();
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
    await server.stop("SIGKILL");
    stop = true;
    await load;
    await db.destroy();
    await server.start();
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
    inFreshDatabase(async (db, tenantId, serverId) => {
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
    inFreshDatabase(async (db, tenantId, serverId) => {
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
    inFreshDatabase(async (db, tenantId, serverId) => {
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
    const info = await server.createDatabase();
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

/** The tenant's chain head as admission reads it (outside any lock). */
async function readHead(db: Knex, tenantId: string) {
  const h = await db("audit_chain_heads").where({ tenant_id: tenantId }).first("head", "seq");
  return { head: h.head as string | null, seq: Number(h.seq) };
}

/** Statements `db` sends while `body` runs (knex's query events: also queryOn's). */
async function statementsDuring(db: Knex, body: () => Promise<unknown>): Promise<string[]> {
  const sent: string[] = [];
  const listen = (q: { sql: string }) => sent.push(q.sql);
  db.on("query", listen);
  try {
    await body();
  } finally {
    db.off("query", listen);
  }
  return sent;
}

test.serial(
  "group commit - a guessed chain head: one round trip; a stale guess is rolled back and goes the locking way, the chain never forks",
  async (t) => {
    const info = await server.createDatabase();
    const a = openDb(info.url);
    const b = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(a);
      noteChainHead(a, tenantId, await readHead(a, tenantId));
      const before = { ...guessStats(a) };
      const fresh = await statementsDuring(a, () => start(a, tenantId, serverId));
      t.is(fresh.length, 1, `one round trip on a fresh guess: ${fresh.join(" | ")}`);
      t.is(guessStats(a).guessed, before.guessed + 1);
      // Another instance moves the head: a's guess (its own last commit) is now stale.
      const stale = await readHead(a, tenantId);
      await start(b, tenantId, serverId);
      await start(b, tenantId, serverId);
      noteChainHead(a, tenantId, stale);
      const second = await start(a, tenantId, serverId);
      t.is(guessStats(a).stale, before.stale + 1, "the stale guess was found stale");
      t.is(guessStats(a).guessed, before.guessed + 1, "and not committed on");
      const per = await eventCounts(a, tenantId);
      t.is(per.size, 4);
      t.deepEqual(per.get(second.id), ["operation.exec"]);
      const report = await verifyTenantChain(a, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 4);
      const head = await readHead(a, tenantId);
      t.is(head.seq, 4, "the head is the last of the four events");
    } finally {
      await a.destroy();
      await b.destroy();
    }
  },
);

test.serial(
  "group commit - two instances starting on guessed heads read before each start, while completions move the chain: nothing lost, chain verifies",
  async (t) => {
    const info = await server.createDatabase();
    const a = openDb(info.url);
    const b = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(a);
      const before = { a: { ...guessStats(a) }, b: { ...guessStats(b) } };
      const ids: string[] = [];
      // Each worker reads the head (as admission does), then starts an operation on that guess,
      // and the other instance finishes it: the guesses go stale under the workers' feet.
      const worker = async (db: Knex, other: Knex, n: number) => {
        for (let i = 0; i < n; i++) {
          noteChainHead(db, tenantId, await readHead(db, tenantId));
          const { id } = await start(db, tenantId, serverId);
          ids.push(id);
          if (!(await finishOperation(other, id, done, serverId, tenantId)))
            throw new Error(`${id} not finished`);
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, w) => (w % 2 ? worker(a, b, 25) : worker(b, a, 25))));
      t.is(ids.length, 200);
      const per = await eventCounts(a, tenantId);
      t.is(per.size, 200);
      for (const id of ids) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      const report = await verifyTenantChain(a, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 400);
      const guessed = guessStats(a).guessed - before.a.guessed + guessStats(b).guessed - before.b.guessed;
      t.true(guessed > 0, "some batches committed on a guessed head");
      t.log(
        `guessed ${guessed}, stale ${guessStats(a).stale - before.a.stale + guessStats(b).stale - before.b.stale}`,
      );
    } finally {
      await a.destroy();
      await b.destroy();
    }
  },
);

test.serial(
  "group commit - two instances guessing the same head at once: one commits on it, the other finds it stale, both land in one chain",
  async (t) => {
    const info = await server.createDatabase();
    const a = openDb(info.url);
    const b = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(a);
      const head = await readHead(a, tenantId);
      noteChainHead(a, tenantId, head);
      noteChainHead(b, tenantId, head);
      const [x, y] = await Promise.all([start(a, tenantId, serverId), start(b, tenantId, serverId)]);
      const stats = [guessStats(a), guessStats(b)];
      t.deepEqual(
        stats.map((s) => s.guessed + s.stale),
        [1, 1],
        "each tried its guess once",
      );
      t.is(stats[0]!.guessed + stats[1]!.guessed, 1, "only one committed on the shared guess");
      const per = await eventCounts(a, tenantId);
      t.deepEqual(per.get(x.id), ["operation.exec"]);
      t.deepEqual(per.get(y.id), ["operation.exec"]);
      const report = await verifyTenantChain(a, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is((await readHead(a, tenantId)).seq, head.seq + 2);
    } finally {
      await a.destroy();
      await b.destroy();
    }
  },
);

/** What the gateway is told of an exec started by `start` (its row's facts). */
const knownExec = (startedAt: number) => ({ operationType: "exec", startedAt, runId: null });

test.serial(
  "group commit - a completion whose facts are known, on a guessed head: one round trip; one no longer running or with other facts commits nothing on the guess and goes the locking way",
  async (t) => {
    const info = await server.createDatabase();
    const db = openDb(info.url);
    // A second instance for the second miss: the first one's guesses of the tenant rest a second.
    const other = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(db);
      const [x, y, z] = [
        await start(db, tenantId, serverId),
        await start(db, tenantId, serverId),
        await start(db, tenantId, serverId),
      ];
      noteChainHead(db, tenantId, await readHead(db, tenantId));
      const before = { ...guessStats(db) };
      let won: unknown;
      const one = await statementsDuring(db, async () => {
        won = await finishOperation(db, x.id, done, serverId, tenantId, undefined, knownExec(x.startedAt));
      });
      t.deepEqual(won, { operationType: "exec", startedAt: x.startedAt });
      t.is(one.length, 1, `one round trip: ${one.join(" | ")}`);
      t.is(guessStats(db).guessed, before.guessed + 1);
      // x again (no longer running), on a fresh guess: the update moves no row, nothing commits.
      noteChainHead(db, tenantId, await readHead(db, tenantId));
      t.is(
        await finishOperation(db, x.id, done, serverId, tenantId, undefined, knownExec(x.startedAt)),
        null,
      );
      t.is(guessStats(db).stale, before.stale + 1, "the missed update stopped the guessed commit");
      // y with facts its row does not hold: the event would lie, so the locking way finishes it from its row.
      noteChainHead(other, tenantId, await readHead(db, tenantId));
      const lied = { operationType: "exec", startedAt: y.startedAt, runId: "not-its-run" };
      t.deepEqual(await finishOperation(other, y.id, done, serverId, tenantId, undefined, lied), {
        operationType: "exec",
        startedAt: y.startedAt,
      });
      t.is(guessStats(other).stale, 1, "the told facts stopped the guessed commit");
      t.is(guessStats(other).guessed, 0);
      const runs = await db("audit_events")
        .where({ operation_id: y.id, event_type: "operation.completed" })
        .select("run_id");
      t.deepEqual(
        runs.map((r) => r.run_id),
        [null],
        "the event holds the row's run, not the told one",
      );
      const per = await eventCounts(db, tenantId);
      t.deepEqual(per.get(x.id), ["operation.completed", "operation.exec"]);
      t.deepEqual(per.get(y.id), ["operation.completed", "operation.exec"]);
      t.deepEqual(per.get(z.id), ["operation.exec"]);
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 5);
    } finally {
      await db.destroy();
      await other.destroy();
    }
  },
);

test.serial(
  "group commit - completions with known facts on the head the starting instance wrote, racing starts and duplicate reports on two instances: each finished once, chain verifies",
  async (t) => {
    const info = await server.createDatabase();
    const a = openDb(info.url);
    const b = openDb(info.url);
    try {
      const { tenantId, serverId } = await setup(a);
      const before = { a: { ...guessStats(a) }, b: { ...guessStats(b) } };
      const ids: string[] = [];
      let wins = 0;
      // The finishing instance is told the head the starting one just wrote (the job's hint), as a gateway is.
      const worker = async (db: Knex, other: Knex, n: number) => {
        for (let i = 0; i < n; i++) {
          noteChainHead(db, tenantId, await readHead(db, tenantId));
          const { id, startedAt } = await start(db, tenantId, serverId);
          ids.push(id);
          noteChainHead(other, tenantId, await readHead(db, tenantId));
          const known = knownExec(startedAt);
          const reports = await Promise.all([
            finishOperation(other, id, done, serverId, tenantId, undefined, known),
            finishOperation(other, id, done, serverId, tenantId, undefined, known),
            finishOperation(db, id, done, serverId, tenantId, undefined, known),
          ]);
          wins += reports.filter((r) => r !== null).length;
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, w) => (w % 2 ? worker(a, b, 25) : worker(b, a, 25))));
      t.is(ids.length, 200);
      t.is(wins, 200, "each operation finished exactly once");
      const per = await eventCounts(a, tenantId);
      for (const id of ids) t.deepEqual(per.get(id), ["operation.completed", "operation.exec"], id);
      const report = await verifyTenantChain(a, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 400);
      const guessed = guessStats(a).guessed - before.a.guessed + guessStats(b).guessed - before.b.guessed;
      t.true(guessed > 0, "some batches committed on a guessed head");
      t.log(
        `guessed ${guessed}, stale ${guessStats(a).stale - before.a.stale + guessStats(b).stale - before.b.stale}`,
      );
    } finally {
      await a.destroy();
      await b.destroy();
    }
  },
);

test.serial(
  "group commit - a completion whose facts are known, the locking way (no guess): the head alone is read under its lock, no read of the operation; one no longer running or with other facts is undone and finished from its row",
  async (t) => {
    const info = await server.createDatabase();
    const db = openDb(info.url);
    // Each finish on an instance of its own: no guessed head, so the locking way.
    const fresh = async <T>(body: (other: Knex) => Promise<T>): Promise<{ value: T; sent: string[] }> => {
      const other = openDb(info.url);
      try {
        let value: T | undefined;
        const sent = await statementsDuring(other, async () => {
          value = await body(other);
        });
        t.is(guessStats(other).guessed + guessStats(other).stale, 0, "no guess was tried");
        return { value: value as T, sent };
      } finally {
        await other.destroy();
      }
    };
    try {
      const { tenantId, serverId } = await setup(db);
      const [x, y] = [await start(db, tenantId, serverId), await start(db, tenantId, serverId)];
      const finish = (other: Knex, id: string, known: KnownOperation) =>
        finishOperation(other, id, done, serverId, tenantId, undefined, known);
      const first = await fresh((o) => finish(o, x.id, knownExec(x.startedAt)));
      t.deepEqual(first.value, { operationType: "exec", startedAt: x.startedAt });
      t.is(first.sent.length, 2, `two round trips: ${first.sent.join(" | ")}`);
      t.false(
        first.sent.some((s) => /^SELECT .* FROM `operations`/m.test(s)),
        `the operation's row is not read: ${first.sent.join(" | ")}`,
      );
      // x again: its row is no longer running, so the guarded update moves nothing and the batch is undone.
      const again = await fresh((o) => finish(o, x.id, knownExec(x.startedAt)));
      t.is(again.value, null);
      t.true(
        again.sent.some((s) => /FROM `operations`/.test(s) && /FOR UPDATE/.test(s)),
        "then the row was read",
      );
      // y with facts its row does not hold: the event would lie, so it is finished from its row.
      const lied = { operationType: "exec", startedAt: y.startedAt, runId: "not-its-run" };
      t.deepEqual((await fresh((o) => finish(o, y.id, lied))).value, {
        operationType: "exec",
        startedAt: y.startedAt,
      });
      const runs = await db("audit_events")
        .where({ operation_id: y.id, event_type: "operation.completed" })
        .select("run_id");
      t.deepEqual(
        runs.map((r) => r.run_id),
        [null],
        "the event holds the row's run, not the told one",
      );
      const per = await eventCounts(db, tenantId);
      t.deepEqual(per.get(x.id), ["operation.completed", "operation.exec"], "x completed once");
      t.deepEqual(per.get(y.id), ["operation.completed", "operation.exec"]);
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 4);
    } finally {
      await db.destroy();
    }
  },
);

test.serial(
  "group commit - a batch's final states share what they share: one UPDATE sets a value common to all rows once and each row's own values by id",
  async (t) =>
    inFreshDatabase(async (db, tenantId, serverId) => {
      const N = 12;
      const started = await Promise.all(Array.from({ length: N }, () => start(db, tenantId, serverId)));
      const results = started.map((_, i) => ({
        status: i % 4 === 0 ? ("failed" as const) : ("completed" as const),
        exit_code: i % 4 === 0 ? 2 : 0,
        stdout: i % 3 === 0 ? `out ${i}` : "",
        stderr: "",
        duration_ms: i,
      }));
      // One process, all at once: one batch (or a few), told the rows' facts as a gateway is.
      const wins = await Promise.all(
        started.map(({ id, startedAt }, i) =>
          finishOperation(db, id, results[i]!, serverId, tenantId, undefined, knownExec(startedAt)),
        ),
      );
      t.true(wins.every(Boolean));
      const rows = await db("operations")
        .whereIn(
          "id",
          started.map((s) => s.id),
        )
        .select("id", "status", "exit_code", "stdout", "stderr", "duration_ms", "delivery", "error");
      const byId = new Map(rows.map((r) => [r.id, r]));
      started.forEach(({ id }, i) => {
        const r = results[i]!;
        t.like(byId.get(id), { ...r, delivery: "finished", error: null }, `operation ${i}`);
      });
      const report = await verifyTenantChain(db, tenantId, keys);
      t.true(report.ok, JSON.stringify(report));
      t.is(report.ok && report.events, 2 * N);
    }),
);

test.serial(
  "group commit - operations started in one batch, some with a key, a run id and a lease and some without: each row holds its own (a column no row fills is left to its default)",
  async (t) =>
    inFreshDatabase(async (db, tenantId, serverId) => {
      const keyId = randomUUID();
      const specs = [
        { keyId, runId: "run-1", leaseMs: 60_000 as number | null },
        { keyId: null, runId: null, leaseMs: null },
        { keyId: null, runId: "run-3", leaseMs: 60_000 },
      ];
      const mk = (s: (typeof specs)[number]) =>
        createOperation(db, {
          tenantId,
          serverId,
          operationType: "exec",
          keyId: s.keyId,
          runId: s.runId,
          leaseMs: s.leaseMs,
          deadlineAt: Date.now() + 60_000,
          audit: { command: "true" },
        });
      // All at once, then a batch where no row has any of them.
      const first = await Promise.all(specs.map(mk));
      const bare = await Promise.all([specs[1]!, specs[1]!].map(mk));
      const rows = await db("operations")
        .whereIn(
          "id",
          [...first, ...bare].map((o) => o.id),
        )
        .select("id", "key_id", "run_id", "lease_expires_at", "pre_boot_id");
      const byId = new Map(rows.map((r) => [r.id, r]));
      [...specs, specs[1]!, specs[1]!].forEach((s, i) => {
        const r = byId.get([...first, ...bare][i]!.id);
        t.is(r.key_id, s.keyId, `operation ${i}: key`);
        t.is(r.run_id, s.runId, `operation ${i}: run`);
        t.is(r.lease_expires_at === null, s.leaseMs === null, `operation ${i}: lease`);
        t.is(r.pre_boot_id, null);
      });
    }),
);

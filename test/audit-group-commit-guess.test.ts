// Group commit on a guessed chain head (control-plane/src/audit/group-commit.ts), on a real
// MariaDB: operations started on a guessed head (noteChainHead: what an automation key's
// admission reads) and completions whose facts their gateway was told commit in one round trip;
// a stale guess, also under two instances racing, is rolled back whole, goes the locking way and
// never forks the chain; a batch's final states share one UPDATE. The batching itself, failures
// and a killed database: audit-group-commit.test.ts.
import { randomUUID } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import type { Knex } from "knex";
import { guessStats, noteChainHead } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { openDb } from "../control-plane/src/db/knex";
import { type KnownOperation, finishOperation } from "../control-plane/src/operations/finish";
import { createOperation } from "../control-plane/src/operations/store";
import {
  done,
  eventCounts,
  inFreshDatabase,
  inTwoInstances,
  ownedAuditDatabase,
  readHead,
  setup,
  start,
  statementsDuring,
} from "./harness/group-commit";

const { keys, server } = ownedAuditDatabase(test);

/**
 * After 200 operations started and finished by two instances `a` and `b`: each has exactly one
 * start and one completion event, the chain verifies with 400 events, and some batches committed
 * on a guessed head (counted from `before`).
 */
async function checkTwoInstances(
  t: ExecutionContext,
  run: {
    a: Knex;
    b: Knex;
    tenantId: string;
    ids: string[];
    before: { a: { guessed: number; stale: number }; b: { guessed: number; stale: number } };
  },
) {
  const { a, b, tenantId, ids, before } = run;
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
}

test.serial(
  "group commit - a guessed chain head: one round trip; a stale guess is rolled back and goes the locking way, the chain never forks",
  async (t) =>
    inTwoInstances(server(), async (a, b, tenantId, serverId) => {
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
    }),
);

test.serial(
  "group commit - two instances starting on guessed heads read before each start, while completions move the chain: nothing lost, chain verifies",
  async (t) =>
    inTwoInstances(server(), async (a, b, tenantId, serverId) => {
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
      await checkTwoInstances(t, { a, b, tenantId, ids, before });
    }),
);

test.serial(
  "group commit - two instances guessing the same head at once: one commits on it, the other finds it stale, both land in one chain",
  async (t) =>
    inTwoInstances(server(), async (a, b, tenantId, serverId) => {
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
    }),
);

/** What the gateway is told of an exec started by `start` (its row's facts). */
const knownExec = (startedAt: number) => ({ operationType: "exec", startedAt, runId: null });

test.serial(
  "group commit - a completion whose facts are known, on a guessed head: one round trip; one no longer running or with other facts commits nothing on the guess and goes the locking way",
  async (t) => {
    const info = await server().createDatabase();
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
      t.deepEqual(won, { operationType: "exec", startedAt: x.startedAt, settled: false });
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
        settled: false,
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
  async (t) =>
    inTwoInstances(server(), async (a, b, tenantId, serverId) => {
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
      t.is(wins, 200, "each operation finished exactly once");
      await checkTwoInstances(t, { a, b, tenantId, ids, before });
    }),
);

test.serial(
  "group commit - a completion whose facts are known, the locking way (no guess): the head alone is read under its lock, no read of the operation; one no longer running or with other facts is undone and finished from its row",
  async (t) => {
    const info = await server().createDatabase();
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
      t.deepEqual(first.value, { operationType: "exec", startedAt: x.startedAt, settled: false });
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
        settled: false,
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
    inFreshDatabase(server(), async (db, tenantId, serverId) => {
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
    inFreshDatabase(server(), async (db, tenantId, serverId) => {
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

// An automation key's request counted by the commit of the operation it starts
// (control-plane/src/auth/deferred-count.ts), on a real MariaDB: the count commits with the
// start, once, whoever commits the start first (the gateway, then the api: "already", nothing
// counted twice); the guard refuses the whole start, leaving nothing behind, when the key's row
// changed, when the window is past its limit, or when a later window of the key has begun; a
// refused start in a batch fails alone. The same requests over HTTP: count-with-start.test.ts.
import { randomUUID } from "node:crypto";
import test from "ava";
import type { Knex } from "knex";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { newAutomationKeyRow } from "../control-plane/src/auth/automation-key";
import {
  CountRefusedError,
  type CountWithStart,
  KEY_DIGEST_SQL,
} from "../control-plane/src/auth/deferred-count";
import type { JobStart } from "../control-plane/src/bus/job-start";
import { buildOperation, commitStart } from "../control-plane/src/operations/store";
import { inFreshDatabase, ownedAuditDatabase } from "./harness/group-commit";

const { keys, server } = ownedAuditDatabase(test);

const WINDOW_MS = 60_000;
const windowNow = () => Math.floor(Date.now() / WINDOW_MS) * WINDOW_MS;

async function keyOf(db: Knex, tenantId: string, rateLimit: number) {
  const { row } = newAutomationKeyRow(tenantId, `k-${randomUUID().slice(0, 6)}`, { rate_limit: rateLimit });
  await db("automation_keys").insert(row);
  return row.id;
}

/** The key row's digest as the full admission reads it. */
async function digestOf(db: Knex, keyId: string): Promise<string> {
  const [rows] = await db.raw(`SELECT ${KEY_DIGEST_SQL} AS d FROM automation_keys k WHERE k.id = ?`, [keyId]);
  return String(rows[0].d);
}

function startWith(tenantId: string, serverId: string, keyId: string, count: CountWithStart): JobStart {
  return {
    ...buildOperation({
      tenantId,
      serverId,
      operationType: "exec",
      keyId,
      runId: null,
      leaseMs: 60_000,
      deadlineAt: Date.now() + 60_000,
      audit: { command: "true" },
    }),
    count,
  };
}

async function counted(db: Knex, keyId: string, windowStart: number): Promise<number> {
  const row = await db("rate_limit_counters")
    .where({ key_id: keyId, window_seconds: 60, window_start: windowStart })
    .first("count");
  return Number(row?.count ?? 0);
}

const operationRows = async (db: Knex, id: string) =>
  Number((await db("operations").where({ id }).count({ n: "*" }))[0]!.n);
const eventsOf = async (db: Knex, id: string) =>
  Number((await db("audit_events").where({ operation_id: id }).count({ n: "*" }))[0]!.n);

test("count with start - committed with its start once, whoever commits it first", async (t) => {
  await inFreshDatabase(server(), async (db, tenantId, serverId) => {
    const keyId = await keyOf(db, tenantId, 100);
    const window = windowNow();
    const count = {
      key_id: keyId,
      window_seconds: 60,
      window_start: window,
      digest: await digestOf(db, keyId),
    };
    const start = startWith(tenantId, serverId, keyId, count);
    t.is(await commitStart(db, start), "started");
    t.is(await counted(db, keyId, window), 1);
    // The api committing the same start after its gateway did: its row is there, nothing more counted.
    t.is(await commitStart(db, start), "already");
    t.is(await counted(db, keyId, window), 1);
    t.is(await operationRows(db, start.row.id), 1);
    t.is(await eventsOf(db, start.row.id), 1);
    // A second request of the key: counted beside the first.
    t.is(await commitStart(db, startWith(tenantId, serverId, keyId, count)), "started");
    t.is(await counted(db, keyId, window), 2);
    const report = await verifyTenantChain(db, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
  });
});

test("count with start - the guard refuses a changed key, a full window and a finished window, leaving nothing", async (t) => {
  await inFreshDatabase(server(), async (db, tenantId, serverId) => {
    const keyId = await keyOf(db, tenantId, 3);
    const window = windowNow();
    const digest = await digestOf(db, keyId);
    const count = { key_id: keyId, window_seconds: 60, window_start: window, digest };
    const refused = async (c: CountWithStart, why: string) => {
      const before = await counted(db, c.key_id, c.window_start);
      const start = startWith(tenantId, serverId, keyId, c);
      const err = await t.throwsAsync(commitStart(db, start), undefined, why);
      t.true(err instanceof CountRefusedError, `${why}: ${err?.message}`);
      t.is(await operationRows(db, start.row.id), 0, `${why}: no operation row`);
      t.is(await eventsOf(db, start.row.id), 0, `${why}: no audit event`);
      t.is(await counted(db, c.key_id, c.window_start), before, `${why}: nothing counted`);
    };

    // Changed since the request was admitted on it: a scope, then a revoke.
    await db("automation_keys")
      .where({ id: keyId })
      .update({ operations: JSON.stringify(["deploy"]) });
    await refused(count, "a scope changed");
    await db("automation_keys").where({ id: keyId }).update({ operations: "[]" });
    t.is(await digestOf(db, keyId), digest, "the same columns give the same digest");
    t.is(await commitStart(db, startWith(tenantId, serverId, keyId, count)), "started");
    await db("automation_keys").where({ id: keyId }).update({ revoked_at: Date.now() });
    await refused(count, "revoked");
    await db("automation_keys").where({ id: keyId }).update({ revoked_at: null });

    // The limit (3): two more pass, the fourth request of the window is refused.
    t.is(await commitStart(db, startWith(tenantId, serverId, keyId, count)), "started");
    t.is(await commitStart(db, startWith(tenantId, serverId, keyId, count)), "started");
    t.is(await counted(db, keyId, window), 3);
    await refused(count, "past the limit");

    // A window of the key that has ended: counting into it once a later one began is refused.
    const earlier = { ...count, window_start: window - WINDOW_MS };
    await refused(earlier, "a later window has begun");

    const report = await verifyTenantChain(db, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
  });
});

test("count with start - in one batch, only the start whose guard refuses fails", async (t) => {
  await inFreshDatabase(server(), async (db, tenantId, serverId) => {
    const open = await keyOf(db, tenantId, 100);
    const full = await keyOf(db, tenantId, 2);
    const window = windowNow();
    const countOf = async (keyId: string) => ({
      key_id: keyId,
      window_seconds: 60,
      window_start: window,
      digest: await digestOf(db, keyId),
    });
    const openCount = await countOf(open);
    const fullCount = await countOf(full);
    // Queued together (one tenant: one batch): 6 of a key with room, 4 of a key limited to 2.
    const starts = [
      ...Array.from({ length: 6 }, () => startWith(tenantId, serverId, open, openCount)),
      ...Array.from({ length: 4 }, () => startWith(tenantId, serverId, full, fullCount)),
    ];
    const outcomes = await Promise.allSettled(starts.map((s) => commitStart(db, s)));
    const ok = outcomes.filter((o) => o.status === "fulfilled").length;
    const refusedCount = outcomes.filter(
      (o) => o.status === "rejected" && o.reason instanceof CountRefusedError,
    ).length;
    t.is(ok, 8, JSON.stringify(outcomes.map((o) => o.status)));
    t.is(refusedCount, 2);
    t.is(await counted(db, open, window), 6);
    t.is(await counted(db, full, window), 2);
    for (const [i, s] of starts.entries())
      t.is(await operationRows(db, s.row.id), outcomes[i]!.status === "fulfilled" ? 1 : 0);
    const report = await verifyTenantChain(db, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
    t.is(report.ok && report.events, 8);
  });
});

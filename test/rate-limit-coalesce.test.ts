// The per-key rate-limit counter coalesces one process's concurrent requests into one
// `count + k` increment (control-plane/src/auth/rate-limit.ts). The limit must stay exact across
// instances: with two connection pools (two api processes) counting 300 requests of one key at
// once against a limit of 100, exactly 100 are allowed and the ordinals handed out are 1…300,
// each once — on MariaDB and on SQLite.
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import type { Knex } from "knex";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { committing } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import {
  countRequest,
  countRequestInCommit,
  countRequestReading,
} from "../control-plane/src/auth/rate-limit";
import { createTenant } from "../control-plane/src/cli/admin";
import { createOperation } from "../control-plane/src/operations/store";
import { migrate, openDb } from "../control-plane/src/db/knex";
import { cleanupAll } from "./harness/cleanup";
import { sharedMariaDb } from "./harness/mariadb";

test.after.always(cleanupAll);

async function exactAcross(t: import("ava").ExecutionContext, a: Knex, b: Knex) {
  await migrate(a);
  const now = Date.now();
  const results = await Promise.all(
    Array.from({ length: 300 }, (_, i) => countRequest(i % 2 ? a : b, "key-1", 60, 100, now)),
  );
  t.is(results.filter((r) => r.allowed).length, 100, "exactly the limit allowed");
  t.deepEqual(
    results.map((r) => r.count).sort((x, y) => x - y),
    Array.from({ length: 300 }, (_, i) => i + 1),
    "every ordinal 1…300 handed out once",
  );
  const row = await a("rate_limit_counters").where({ key_id: "key-1" }).first("count");
  t.is(Number(row.count), 300);
  // A later window starts again at 1 and drops the finished one.
  const next = await countRequest(a, "key-1", 60, 100, now + 60_000);
  t.is(next.count, 1);
  t.is(Number((await a("rate_limit_counters").where({ key_id: "key-1" }).count({ n: "*" }).first())?.n), 1);
}

test("rate limit - coalesced counts stay exact across two instances (MariaDB)", async (t) => {
  const info = await (await sharedMariaDb()).createDatabase();
  const a = openDb(info.url);
  const b = openDb(info.url);
  try {
    await exactAcross(t, a, b);
  } finally {
    await a.destroy();
    await b.destroy();
  }
});

test("rate limit - coalesced counts stay exact across two instances (SQLite)", async (t) => {
  const url = `sqlite://${join(mkdtempSync(join(tmpdir(), "relayctl-rl-")), "db.sqlite")}`;
  const a = openDb(url);
  const b = openDb(url);
  try {
    await exactAcross(t, a, b);
  } finally {
    await a.destroy();
    await b.destroy();
  }
});

test("rate limit - requests counted inside their tenant's batches of audited writes, beside counts alone, on two instances: ordinals exact, each read after its increment (MariaDB)", async (t) => {
  const keys = resolveAuditKeys({
    databaseUrl: "mysql://",
    auditHmacKey: randomBytes(32).toString("base64"),
  })!;
  useAuditKeys(keys);
  const info = await (await sharedMariaDb()).createDatabase();
  const a = openDb(info.url);
  const b = openDb(info.url);
  try {
    await migrate(a);
    const tenantId = (await createTenant(a, `t-${randomUUID().slice(0, 8)}`)).tenant_id;
    const serverId = randomUUID();
    await a("servers").insert({ id: serverId, tenant_id: tenantId, name: "s1", created_at: Date.now() });
    const start = (db: Knex) =>
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
    const now = Date.now();
    // The read each count brings: the counter's own row, so it must see its increment.
    const read = { sql: "SELECT `count` FROM `rate_limit_counters` WHERE `key_id` = ?", bindings: ["key-2"] };
    let inCommit = 0;
    const count = async (db: Knex, i: number) => {
      // Half of them while the instance's batches of the tenant are committing: in a batch.
      if (i % 2 === 0 && committing(db, tenantId)) {
        inCommit++;
        return countRequestInCommit<{ count: number }>(db, tenantId, "key-2", 60, read, now);
      }
      return countRequestReading<{ count: number }>(db, "key-2", 60, () => read, now);
    };
    const results = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const db = i % 4 < 2 ? a : b;
        const started = start(db); // keeps the instance's committer busy
        const c = await count(db, i);
        await started;
        return c;
      }),
    );
    t.true(inCommit > 50, `counted in batches: ${inCommit}`);
    t.deepEqual(
      results.map((r) => r.count).sort((x, y) => x - y),
      Array.from({ length: 300 }, (_, i) => i + 1),
      "every ordinal 1…300 handed out once",
    );
    for (const r of results) t.true(Number(r.rows[0]?.count) >= r.count, "read after its own increment");
    const row = await a("rate_limit_counters").where({ key_id: "key-2" }).first("count");
    t.is(Number(row.count), 300);
    const report = await verifyTenantChain(a, tenantId, keys);
    t.true(report.ok, JSON.stringify(report));
    t.is(report.ok && report.events, 300);
  } finally {
    await a.destroy();
    await b.destroy();
  }
});

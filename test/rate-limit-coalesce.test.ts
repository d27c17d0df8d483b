// The per-key rate-limit counter coalesces one process's concurrent requests into one
// `count + k` increment (control-plane/src/auth/rate-limit.ts). The limit must stay exact across
// instances: with two connection pools (two api processes) counting 300 requests of one key at
// once against a limit of 100, exactly 100 are allowed and the ordinals handed out are 1…300,
// each once — on MariaDB and on SQLite.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import type { Knex } from "knex";
import { countRequest } from "../control-plane/src/auth/rate-limit";
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

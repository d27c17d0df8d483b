// Master-key rotation on SQLite (the MariaDB run through the CLI is
// test/master-key-rotation.test.ts): every sealed column is covered, a refusal
// writes nothing, a dry run writes nothing, and an interrupted run is finished
// by running again.
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { type Db, migrate, openDb } from "../db/knex.js";
import { open, seal } from "../registry/crypto.js";
import { AdminError } from "./admin.js";
import { SEALED_COLUMNS, rotateMasterKey } from "./admin-master-key.js";

const OLD = randomBytes(32);
const NEW = randomBytes(32);

async function freshDb(t: { teardown(fn: () => unknown): void }): Promise<Db> {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-rotate-"));
  const db = openDb(`sqlite://${join(dir, "t.db")}`);
  t.teardown(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await migrate(db);
  return db;
}

/** n env values of one application, sealed under key. */
async function plantEnv(db: Db, key: Buffer, n: number): Promise<string> {
  const applicationId = randomUUID();
  await db("application_env").insert(
    Array.from({ length: n }, (_, i) => ({
      application_id: applicationId,
      name: `V${i}`,
      value_sealed: seal(key, `value-${i}`),
      updated_at: Date.now(),
    })),
  );
  return applicationId;
}

const sealedValues = async (db: Db) =>
  (await db("application_env").orderBy("name").select("name", "value_sealed")) as {
    name: string;
    value_sealed: string;
  }[];

test("master key - every column named *_sealed or *_ciphertext is rotated", async (t) => {
  const db = await freshDb(t);
  const tables = (await db.raw("SELECT name FROM sqlite_master WHERE type = 'table'")) as { name: string }[];
  const found: string[] = [];
  for (const { name } of tables) {
    for (const col of (await db.raw(`PRAGMA table_info("${name}")`)) as { name: string }[])
      if (/_(sealed|ciphertext)$/.test(col.name)) found.push(`${name}.${col.name}`);
  }
  t.deepEqual(found.sort(), SEALED_COLUMNS.map((c) => `${c.table}.${c.column}`).sort());
});

test("master key - rotation re-seals under the new key; a second run re-seals nothing", async (t) => {
  const db = await freshDb(t);
  await plantEnv(db, OLD, 250); // more than one batch
  const first = await rotateMasterKey(db, { old: OLD, new: NEW }, { dryRun: false });
  t.like(first, { dry_run: false, resealed: 250, already_new_key: 0 });
  for (const row of await sealedValues(db)) {
    t.is(open(NEW, row.value_sealed), `value-${row.name.slice(1)}`);
    t.throws(() => open(OLD, row.value_sealed));
  }
  const again = await rotateMasterKey(db, { old: OLD, new: NEW }, { dryRun: false });
  t.like(again, { resealed: 0, already_new_key: 250 });
});

test("master key - an interrupted rotation (some rows under the new key) finishes on the next run", async (t) => {
  const db = await freshDb(t);
  await plantEnv(db, NEW, 3);
  await plantEnv(db, OLD, 4);
  const result = await rotateMasterKey(db, { old: OLD, new: NEW }, { dryRun: false });
  t.like(result, { resealed: 4, already_new_key: 3 });
  for (const row of await sealedValues(db)) t.notThrows(() => open(NEW, row.value_sealed));
});

test("master key - a dry run counts and writes nothing", async (t) => {
  const db = await freshDb(t);
  await plantEnv(db, OLD, 5);
  const before = await sealedValues(db);
  const result = await rotateMasterKey(db, { old: OLD, new: NEW }, { dryRun: true });
  t.like(result, { dry_run: true, resealed: 5, already_new_key: 0 });
  t.deepEqual(await sealedValues(db), before);
});

test("master key - a row under neither key refuses the whole run, naming it, and writes nothing", async (t) => {
  const db = await freshDb(t);
  await plantEnv(db, OLD, 5);
  const stranger = await plantEnv(db, randomBytes(32), 1);
  const before = await sealedValues(db);
  const err = await t.throwsAsync(rotateMasterKey(db, { old: OLD, new: NEW }, { dryRun: false }), {
    instanceOf: AdminError,
  });
  t.regex(err.message, /nothing re-sealed: 1 stored secret/);
  t.true(err.message.includes(`application_id=${stranger}`), err.message);
  t.deepEqual(await sealedValues(db), before);
  await t.throwsAsync(rotateMasterKey(db, { old: OLD, new: OLD }, { dryRun: false }), {
    message: /is the current one/,
  });
});

// The SQLite driver over node:sqlite, through knex as the stores use it (openDb) and directly:
// values come back as better-sqlite3 gave them, transactions roll back, and errors carry the
// codes the stores match on.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import { isDuplicate } from "../github/sql.js";
import { isSqlite, openDb } from "./knex.js";
import { Database, resultCodeName } from "./node-sqlite.js";
import { isStoreUnavailable } from "./unavailable.js";

/** A file database (WAL needs a file) in a temp dir, closed and removed when the test ends. */
function fileDb(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-sqlite-"));
  const file = join(dir, "db.sqlite");
  const db = openDb(`sqlite://${file}`);
  t.teardown(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  return { db, file };
}

async function itemsTable(db: ReturnType<typeof openDb>) {
  await db.schema.createTable("items", (tb) => {
    tb.increments("id");
    tb.string("name").notNullable().unique();
    tb.integer("n").nullable();
    tb.float("f").nullable();
    tb.boolean("flag").nullable();
    tb.bigInteger("at").nullable();
    tb.binary("payload").nullable();
  });
}

test("sqlite - values round-trip through knex as better-sqlite3 gave them", async (t) => {
  const { db } = fileDb(t);
  t.true(isSqlite(db));
  await itemsTable(db);
  const when = new Date("2026-01-02T03:04:05.678Z");
  const [id] = await db("items").insert({
    name: "a",
    n: 7,
    f: 1.5,
    flag: true,
    at: when,
    payload: Buffer.from([0, 1, 255]),
  });
  t.is(id, 1); // knex's insert answers [lastInsertRowid]
  await db("items").insert({ name: "b", n: undefined, flag: false });
  const rows = await db("items").orderBy("id");
  // Plain objects (deepEqual checks the prototype), booleans and Dates as numbers, BLOBs as Buffers.
  t.deepEqual(rows, [
    { id: 1, name: "a", n: 7, f: 1.5, flag: 1, at: when.valueOf(), payload: Buffer.from([0, 1, 255]) },
    { id: 2, name: "b", n: null, f: null, flag: 0, at: null, payload: null },
  ]);
  t.true(Buffer.isBuffer(rows[0].payload));
  t.is(await db("items").where({ name: "b" }).update({ n: 3 }), 1); // changes
  t.deepEqual(await db("items").insert({ name: "c" }).returning(["id", "name"]), [{ id: 3, name: "c" }]);
  t.is(await db("items").where("id", ">", 1).del(), 2);
});

test("sqlite - integers past 2^53 read as numbers, or bigints with safeIntegers", async (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  db.exec("CREATE TABLE t (v INTEGER)");
  db.prepare("INSERT INTO t VALUES (?)").run(2n ** 60n);
  // node:sqlite alone throws ERR_OUT_OF_RANGE here; better-sqlite3 answered the nearest number.
  t.deepEqual(db.prepare("SELECT v FROM t").all(), [{ v: 2 ** 60 }]);
  t.deepEqual(db.prepare("SELECT v FROM t").safeIntegers().all(), [{ v: 2n ** 60n }]);
  t.deepEqual(db.prepare("SELECT count(*) AS c FROM t").get(), { c: 1 });
});

test("sqlite - positional and named bindings, undefined as NULL, reader detection", (t) => {
  const db = new Database(":memory:");
  t.teardown(() => db.close());
  t.deepEqual(db.prepare("SELECT :a AS a, ? AS b, ? AS c").all({ a: "x" }, [2, undefined]), [
    { a: "x", b: 2, c: null },
  ]);
  db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT)");
  t.true(db.prepare("SELECT 1").reader);
  t.true(db.prepare("INSERT INTO t (s) VALUES (?) RETURNING id").reader);
  const insert = db.prepare("INSERT INTO t (s) VALUES (?)");
  t.false(insert.reader);
  insert.run("a");
  t.deepEqual(insert.run(["b"]), { changes: 1, lastInsertRowid: 2 });
});

test("sqlite - a transaction that throws leaves nothing behind; one that returns commits", async (t) => {
  const { db } = fileDb(t);
  await itemsTable(db);
  const boom = new Error("boom");
  const err = await t.throwsAsync(
    db.transaction(async (trx) => {
      await trx("items").insert({ name: "gone" });
      t.is((await trx("items").count({ c: "*" }))[0].c, 1); // visible inside
      throw boom;
    }),
  );
  t.is(err, boom);
  t.deepEqual(await db("items").count({ c: "*" }), [{ c: 0 }]);
  await db.transaction(async (trx) => {
    await trx("items").insert({ name: "kept" });
  });
  t.deepEqual(await db("items").pluck("name"), ["kept"]);
});

test("sqlite - a unique violation carries SQLITE_CONSTRAINT_UNIQUE, as the stores match", async (t) => {
  const { db } = fileDb(t);
  await itemsTable(db);
  await db("items").insert({ name: "a" });
  const err = await t.throwsAsync(db("items").insert({ name: "a" }));
  t.is((err as Error & { code?: string }).code, "SQLITE_CONSTRAINT_UNIQUE");
  t.regex(err.message, /UNIQUE constraint failed: items\.name/);
  t.true(isDuplicate(err)); // what applications, deployments and GitHub stores check
  t.false(isStoreUnavailable(err));
  const pk = await t.throwsAsync(db("items").insert({ id: 1, name: "b" }));
  t.is((pk as Error & { code?: string }).code, "SQLITE_CONSTRAINT_PRIMARYKEY");
});

test("sqlite - openDb sets WAL, foreign keys and the busy timeout on its connection", async (t) => {
  const { db } = fileDb(t);
  const pragma = async (name: string) => Object.values((await db.raw(`PRAGMA ${name}`))[0])[0];
  t.is(await pragma("journal_mode"), "wal");
  t.is(await pragma("foreign_keys"), 1);
  t.is(await pragma("busy_timeout"), 5000);
  await db.schema.createTable("parent", (tb) => tb.increments("id"));
  await db.schema.createTable("child", (tb) => tb.integer("parent_id").references("parent.id"));
  const err = await t.throwsAsync(db("child").insert({ parent_id: 42 }));
  t.is((err as Error & { code?: string }).code, "SQLITE_CONSTRAINT_FOREIGNKEY");
});

test("sqlite - a write locked out by another connection is SQLITE_BUSY, a store unavailable", async (t) => {
  const { db, file } = fileDb(t);
  await db.schema.createTable("t", (tb) => tb.integer("v"));
  const holder = new Database(file);
  const other = new Database(file);
  t.teardown(() => {
    holder.close();
    other.close();
  });
  other.pragma("busy_timeout = 0"); // answer at once instead of waiting for the lock
  holder.exec("BEGIN IMMEDIATE");
  const err = t.throws(() => other.prepare("INSERT INTO t VALUES (1)").run());
  t.is((err as Error & { code?: string }).code, "SQLITE_BUSY");
  t.true(isStoreUnavailable(err));
  holder.exec("ROLLBACK");
});

test("sqlite - result codes are named as better-sqlite3 named them", (t) => {
  t.is(resultCodeName(5), "SQLITE_BUSY");
  t.is(resultCodeName(517), "SQLITE_BUSY_SNAPSHOT");
  t.is(resultCodeName(2067), "SQLITE_CONSTRAINT_UNIQUE");
  t.is(resultCodeName(3091), "SQLITE_CONSTRAINT_DATATYPE");
  t.is(resultCodeName(14), "SQLITE_CANTOPEN");
  t.is(resultCodeName(10 | (40 << 8)), "SQLITE_IOERR"); // an extended code not listed: its primary
  t.is(resultCodeName(250), "SQLITE_UNKNOWN_250");
  const err = t.throws(() => new Database(join(tmpdir(), "no-such-dir-relayctl", "x.db")));
  t.is((err as Error & { code?: string }).code, "SQLITE_CANTOPEN");
});

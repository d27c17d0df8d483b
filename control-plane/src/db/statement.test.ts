import test, { type ExecutionContext } from "ava";
import { openDb } from "./knex.js";
import { compiled, insertRows, placeholders, runStatement, updateRows, updateWhere } from "./statement.js";

/** An in-memory SQLite database (one pooled connection holds it), closed when the test ends. */
function memoryDb(t: ExecutionContext) {
  const db = openDb("sqlite://:memory:");
  t.teardown(() => db.destroy());
  return db;
}

test("statement - a multi-row insert binds every value in column order, a missing one as NULL", (t) => {
  const st = insertRows("t", ["a", "b"], [{ a: 1, b: "x'; DROP TABLE t; --" }, { a: 2 }]);
  t.is(st.sql, "INSERT INTO `t` (`a`, `b`) VALUES (?, ?), (?, ?)");
  t.deepEqual(st.bindings, [1, "x'; DROP TABLE t; --", 2, null]);
});

test("statement - an update binds its values, then its conditions", (t) => {
  const st = updateWhere("operations", { status: "completed", exit_code: 0 }, { id: "i", status: "running" });
  t.is(st.sql, "UPDATE `operations` SET `status` = ?, `exit_code` = ? WHERE `id` = ? AND `status` = ?");
  t.deepEqual(st.bindings, ["completed", 0, "i", "running"]);
  t.is(placeholders(3), "?, ?, ?");
  t.is(compiled(st), st);
});

test("statement - the same rows as knex's builder, on SQLite", async (t) => {
  const db = memoryDb(t);
  await db.schema.createTable("t", (tb) => {
    tb.string("id").primary();
    tb.string("status");
    tb.integer("n").nullable();
  });
  const rows = [
    { id: "a", status: "running", n: 1 },
    { id: "b", status: "running" },
  ];
  await runStatement(db, insertRows("t", ["id", "status", "n"], rows));
  await runStatement(db, updateWhere("t", { status: "done", n: 7 }, { id: "a", status: "running" }));
  await runStatement(db, updateWhere("t", { status: "done" }, { id: "b", status: "gone" }));
  const read = await runStatement(db, {
    sql: "SELECT `id`, `status`, `n` FROM `t` ORDER BY `id`",
    bindings: [],
  });
  t.deepEqual(read, [
    { id: "a", status: "done", n: 7 },
    { id: "b", status: "running", n: null },
  ]);
});

test("statement - updateRows gives each row its own values in one statement, only rows still matching", async (t) => {
  const db = memoryDb(t);
  await db.schema.createTable("t", (tb) => {
    tb.string("id").primary();
    tb.string("status");
    tb.integer("n").nullable();
    tb.text("out").nullable();
  });
  await runStatement(
    db,
    insertRows(
      "t",
      ["id", "status", "n", "out"],
      ["a", "b", "c", "d"].map((id) => ({ id, status: id === "c" ? "gone" : "running", n: 0, out: "-" })),
    ),
  );
  const st = updateRows(
    "t",
    "id",
    [
      { key: "a", values: { status: "done", n: 1, out: "x'); DROP TABLE t; --" } },
      { key: "b", values: { status: "failed", n: null, out: null } },
      { key: "c", values: { status: "done", n: 3, out: "c" } },
    ],
    { status: "running" },
  );
  t.is(
    st.sql,
    "UPDATE `t` SET `status` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END, " +
      "`n` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END, " +
      "`out` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? END " +
      "WHERE `id` IN (?, ?, ?) AND `status` = ?",
  );
  await runStatement(db, st);
  t.deepEqual(
    await runStatement(db, { sql: "SELECT `id`, `status`, `n`, `out` FROM `t` ORDER BY `id`", bindings: [] }),
    [
      { id: "a", status: "done", n: 1, out: "x'); DROP TABLE t; --" },
      { id: "b", status: "failed", n: null, out: null },
      { id: "c", status: "gone", n: 0, out: "-" }, // no longer running: left alone
      { id: "d", status: "running", n: 0, out: "-" }, // not in the statement
    ],
  );
  // One row: the plain UPDATE.
  t.is(
    updateRows("t", "id", [{ key: "d", values: { n: 4 } }], { status: "running" }).sql,
    "UPDATE `t` SET `n` = ? WHERE `id` = ? AND `status` = ?",
  );
});

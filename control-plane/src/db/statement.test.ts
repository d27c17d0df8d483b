import test from "ava";
import knexFactory from "knex";
import { compiled, insertRows, placeholders, runStatement, updateWhere } from "./statement.js";

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
  const db = knexFactory({
    client: "better-sqlite3",
    connection: { filename: ":memory:" },
    useNullAsDefault: true,
  });
  t.teardown(() => db.destroy());
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

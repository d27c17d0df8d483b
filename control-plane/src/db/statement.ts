// Statements with fixed SQL text for the hottest queries of the exec path (an
// operation's start and finish, their audit events). knex's builder compiles
// every query anew (where/insert/update, then toSQL) and raw() scans the text
// again for its bindings: under exec load that was 15-18 % of the api's and the
// gateway's JavaScript time (bench/README.md, fourth wave). Here the text is assembled from
// fixed parts and every value is still bound: mysql2 escapes it (the same
// escaping knex hands it to), never string concatenation of values.
//
// `queryOn` sends a statement on a pooled connection the caller holds, without
// knex's runner; it still emits knex's query events, so query spans
// (tracing/knex.ts) and the database error metric see these queries too.
import type { Knex } from "knex";

export interface Statement {
  readonly sql: string;
  readonly bindings: readonly unknown[];
}

export function isStatement(q: Statement | Knex.QueryBuilder): q is Statement {
  return typeof (q as Statement).sql === "string" && Array.isArray((q as Statement).bindings);
}

export const isMysql = (db: Knex): boolean => db.client.config.client === "mysql2";

/** `?, ?, ?` for n values. */
export const placeholders = (n: number): string => Array.from({ length: n }, () => "?").join(", ");

/** A multi-row INSERT: `rows` in order, each with the `columns` given (a missing value is NULL). */
export function insertRows(
  table: string,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): Statement {
  const row = `(${placeholders(columns.length)})`;
  const bindings: unknown[] = [];
  for (const r of rows) for (const c of columns) bindings.push(r[c] ?? null);
  return {
    sql: `INSERT INTO \`${table}\` (${columns.map((c) => `\`${c}\``).join(", ")}) VALUES ${Array.from(
      { length: rows.length },
      () => row,
    ).join(", ")}`,
    bindings,
  };
}

const assignments = (o: Record<string, unknown>, sep: string) =>
  Object.keys(o)
    .map((c) => `\`${c}\` = ?`)
    .join(sep);

/** UPDATE `table` SET each of `values` WHERE each of `where` is equal (column names are the code's, never input). */
export function updateWhere(
  table: string,
  values: Record<string, unknown>,
  where: Record<string, unknown>,
): Statement {
  return {
    sql: `UPDATE \`${table}\` SET ${assignments(values, ", ")} WHERE ${assignments(where, " AND ")}`,
    bindings: [...Object.values(values), ...Object.values(where)],
  };
}

/**
 * One UPDATE of several rows, each to its own values, by their `key` column:
 * `SET c = CASE key WHEN ? THEN ? … END, …  WHERE key IN (…) AND each of where`.
 * Every row sets the same columns (the first row's). Against one UPDATE per
 * row it saves the server a statement per row: 0.057 against 0.086–0.098 ms of
 * MariaDB CPU per row in batches of 12 (bench/README.md, issue 17).
 */
export function updateRows(
  table: string,
  key: string,
  rows: readonly { key: unknown; values: Record<string, unknown> }[],
  where: Record<string, unknown>,
): Statement {
  const first = rows[0];
  if (!first) throw new Error("updateRows: no rows");
  if (rows.length === 1) return updateWhere(table, first.values, { [key]: first.key, ...where });
  const columns = Object.keys(first.values);
  const whens = rows.map(() => "WHEN ? THEN ?").join(" ");
  const bindings: unknown[] = [];
  for (const c of columns) for (const r of rows) bindings.push(r.key, r.values[c] ?? null);
  for (const r of rows) bindings.push(r.key);
  bindings.push(...Object.values(where));
  const sets = columns.map((c) => `\`${c}\` = CASE \`${key}\` ${whens} END`).join(", ");
  const conditions = [
    `\`${key}\` IN (${placeholders(rows.length)})`,
    ...Object.keys(where).map((c) => `\`${c}\` = ?`),
  ];
  return { sql: `UPDATE \`${table}\` SET ${sets} WHERE ${conditions.join(" AND ")}`, bindings };
}

/** The SQL text and bindings of either form, as the mysql2 driver takes them. */
export function compiled(q: Statement | Knex.QueryBuilder): Statement {
  if (isStatement(q)) return q;
  const c = q.toSQL().toNative();
  return { sql: c.sql, bindings: c.bindings };
}

/**
 * Runs a statement (any database, inside `trx` when given); resolves with its rows. Outside a
 * transaction on MySQL it goes on a pooled connection straight to mysql2 (queryPooled).
 */
export async function runStatement<R = unknown>(db: Knex | Knex.Transaction, st: Statement): Promise<R[]> {
  if (isMysql(db) && !(db as Knex.Transaction).isTransaction)
    return (await queryPooled(db, st.sql, st.bindings))[0] as R[];
  const res = await db.raw(st.sql, st.bindings as Knex.RawBinding[]);
  // mysql2 answers [rows, fields]; SQLite (node-sqlite.ts) the rows.
  return (isMysql(db) ? res[0] : res) as R[];
}

/**
 * queryOn with a connection taken from `db`'s pool for the one round trip (MySQL): the pool's
 * timeout and its KnexTimeoutError are knex's own, as for any query.
 */
export async function queryPooled(
  db: Knex,
  sql: string,
  bindings: readonly unknown[] = [],
): Promise<[unknown, unknown]> {
  const conn = await db.client.acquireConnection();
  try {
    return await queryOn(db, conn, sql, bindings);
  } finally {
    await db.client.releaseConnection(conn);
  }
}

interface MysqlConnection {
  query(
    options: { sql: string },
    values: readonly unknown[],
    cb: (err: (Error & { message: string }) | null, results: unknown, fields: unknown) => void,
  ): void;
}

let uid = 0;

/**
 * Sends `sql` (one statement or several) on `conn`, a connection taken from
 * `db`'s pool (db.client.acquireConnection), with mysql2 directly. Resolves
 * [results, fields] as knex's raw() does on MySQL; an error carries the SQL
 * text (never the values) before its message, as knex's does.
 */
export function queryOn(
  db: Knex,
  conn: unknown,
  sql: string,
  bindings: readonly unknown[] = [],
): Promise<[unknown, unknown]> {
  const client = db.client as Knex.Client & NodeJS.EventEmitter;
  const { __knexUid, __knexTxId } = conn as { __knexUid?: string; __knexTxId?: string };
  const event = { __knexUid, __knexTxId, __knexQueryUid: `stmt-${++uid}`, method: "raw", sql, bindings };
  client.emit("query", event);
  return new Promise((resolve, reject) => {
    (conn as MysqlConnection).query({ sql }, bindings, (err, results, fields) => {
      if (err) {
        err.message = `${sql} - ${err.message}`;
        client.emit("query-error", err, event);
        reject(err);
        return;
      }
      const response: [unknown, unknown] = [results, fields];
      client.emit("query-response", response, event);
      resolve(response);
    });
  });
}

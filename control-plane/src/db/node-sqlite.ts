// The SQLite driver of `make dev` and the SQLite tests: Node's own `node:sqlite` (DatabaseSync),
// shaped as the part of better-sqlite3's API that knex's better-sqlite3 client calls, so that
// client runs on it unchanged (knex-client.ts). Nothing to compile on a fresh machine.
//
// Why our own and not a package: knex 3.3.0 has no node:sqlite client (knex/knex#6162 is open),
// and the one dialect on npm in its place, @photostructure/knex-sqlite 1.0.0, drives
// @photostructure/sqlite, a native addon: it would bring back the binary we are removing.
//
// What better-sqlite3 did that node:sqlite does not, and this adapter restores:
// - rows are plain objects (node:sqlite's have a null prototype), BLOBs are Buffers (not
//   Uint8Array), and integers are numbers even past 2^53 (lossy, as better-sqlite3 with
//   safeIntegers off; node:sqlite throws ERR_OUT_OF_RANGE there, after a write has run);
// - `undefined` binds as NULL, an array argument is spread, a plain object binds named
//   parameters (`:name`, `@name`, `$name` keyed without the prefix);
// - errors carry better-sqlite3's `code` (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY`), which the
//   stores match on, not node's `ERR_SQLITE_ERROR`; node's `errcode` and `errstr` stay.
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";

type Params = unknown[];

/** A prepared statement with better-sqlite3's reader/all/run/get. */
export class Statement {
  /** True when the statement yields rows (a SELECT, a PRAGMA that answers, any RETURNING). */
  readonly reader: boolean;
  #safeIntegers: boolean;

  constructor(
    readonly source: string,
    private readonly st: StatementSync,
    safeIntegers: boolean,
  ) {
    this.reader = st.columns().length > 0;
    // Integers are always read as bigint, then narrowed (rowValue): the only way to read
    // one past 2^53 without node:sqlite throwing.
    st.setReadBigInts(true);
    this.#safeIntegers = safeIntegers;
  }

  /** better-sqlite3's per-statement switch: true keeps integers as bigint. */
  safeIntegers(on = true): this {
    this.#safeIntegers = on;
    return this;
  }

  all(...params: Params): Record<string, unknown>[] {
    const rows = sqliteCall(() => this.st.all(...bindArgs(params)));
    return rows.map((r) => plainRow(r, this.#safeIntegers));
  }

  get(...params: Params): Record<string, unknown> | undefined {
    const row = sqliteCall(() => this.st.get(...bindArgs(params)));
    return row === undefined ? undefined : plainRow(row, this.#safeIntegers);
  }

  run(...params: Params): { changes: number | bigint; lastInsertRowid: number | bigint } {
    const r = sqliteCall(() => this.st.run(...bindArgs(params)));
    return {
      changes: rowValue(r.changes, this.#safeIntegers) as number | bigint,
      lastInsertRowid: rowValue(r.lastInsertRowid, this.#safeIntegers) as number | bigint,
    };
  }
}

/** A connection, opened as better-sqlite3's `new Database(filename, { readonly })` was. */
export class Database {
  readonly #db: DatabaseSync;
  #safeIntegers = false;

  constructor(filename: string, options: { readonly?: boolean } = {}) {
    this.#db = sqliteCall(() => new DatabaseSync(filename, { readOnly: !!options.readonly }));
  }

  prepare(sql: string): Statement {
    return new Statement(
      sql,
      sqliteCall(() => this.#db.prepare(sql)),
      this.#safeIntegers,
    );
  }

  exec(sql: string): this {
    sqliteCall(() => this.#db.exec(sql));
    return this;
  }

  /** `pragma("journal_mode = WAL")`: the rows the pragma answers. */
  pragma(source: string): Record<string, unknown>[] {
    const st = this.prepare(`PRAGMA ${source}`);
    if (st.reader) return st.all();
    st.run();
    return [];
  }

  defaultSafeIntegers(on = true): this {
    this.#safeIntegers = on;
    return this;
  }

  get open(): boolean {
    return this.#db.isOpen;
  }

  get inTransaction(): boolean {
    return this.#db.isTransaction;
  }

  close(): void {
    this.#db.close();
  }
}

const isPlainObject = (v: unknown): v is Record<string, SQLInputValue> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/**
 * better-sqlite3's argument forms as node:sqlite's `(named, ...anonymous)`. The named object is
 * always passed, empty when there is none: node:sqlite takes that for positional-only SQL too.
 */
function bindArgs(params: Params): [Record<string, SQLInputValue>, ...SQLInputValue[]] {
  const anonymous: SQLInputValue[] = [];
  let named: Record<string, SQLInputValue> = {};
  for (const p of params.flat()) {
    if (isPlainObject(p)) named = { ...named, ...p };
    else anonymous.push(bindValue(p));
  }
  return [named, ...anonymous];
}

/** knex already turned Dates and booleans into numbers (_formatBindings); undefined is NULL. */
function bindValue(v: unknown): SQLInputValue {
  if (v === undefined) return null;
  if (typeof v === "boolean") return Number(v);
  return v as SQLInputValue;
}

function rowValue(v: unknown, safeIntegers: boolean): unknown {
  if (typeof v === "bigint") return safeIntegers ? v : Number(v);
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  return v;
}

function plainRow(row: Record<string, unknown>, safeIntegers: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in row) out[k] = rowValue(row[k], safeIntegers);
  return out;
}

/** Runs a node:sqlite call; a SQLite error gets better-sqlite3's `code` for its result code. */
function sqliteCall<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const e = err as Error & { code?: string; errcode?: number };
    if (e.code === "ERR_SQLITE_ERROR" && typeof e.errcode === "number") e.code = resultCodeName(e.errcode);
    throw e;
  }
}

// SQLite's result codes (sqlite.org/rescode.html): a primary code in the low byte, the
// extended one's index in the next. An extended code not listed falls back to its primary name,
// so `code.startsWith("SQLITE_CONSTRAINT")` and `code === "SQLITE_BUSY"` keep their meaning.
const PRIMARY = [
  ["OK", "ERROR", "INTERNAL", "PERM", "ABORT", "BUSY", "LOCKED", "NOMEM", "READONLY", "INTERRUPT"],
  ["IOERR", "CORRUPT", "NOTFOUND", "FULL", "CANTOPEN", "PROTOCOL", "EMPTY", "SCHEMA", "TOOBIG"],
  ["CONSTRAINT", "MISMATCH", "MISUSE", "NOLFS", "AUTH", "FORMAT", "RANGE", "NOTADB", "NOTICE", "WARNING"],
].flat();
const EXTENDED: Record<string, string[]> = {
  ERROR: ["MISSING_COLLSEQ", "RETRY", "SNAPSHOT"],
  BUSY: ["RECOVERY", "SNAPSHOT", "TIMEOUT"],
  LOCKED: ["SHAREDCACHE", "VTAB"],
  READONLY: ["RECOVERY", "CANTLOCK", "ROLLBACK", "DBMOVED", "CANTINIT", "DIRECTORY"],
  CORRUPT: ["VTAB", "SEQUENCE", "INDEX"],
  CANTOPEN: ["NOTEMPDIR", "ISDIR", "FULLPATH", "CONVPATH", "DIRTYWAL", "SYMLINK"],
  CONSTRAINT: [
    ...["CHECK", "COMMITHOOK", "FOREIGNKEY", "FUNCTION", "NOTNULL", "PRIMARYKEY", "TRIGGER", "UNIQUE"],
    ...["VTAB", "ROWID", "PINNED", "DATATYPE"],
  ],
};

/** `2067` → `SQLITE_CONSTRAINT_UNIQUE`, `5` → `SQLITE_BUSY`. */
export function resultCodeName(errcode: number): string {
  const primary = PRIMARY[errcode & 0xff];
  if (!primary) return `SQLITE_UNKNOWN_${errcode}`;
  const extended = errcode >> 8 ? EXTENDED[primary]?.[(errcode >> 8) - 1] : undefined;
  return extended ? `SQLITE_${primary}_${extended}` : `SQLITE_${primary}`;
}

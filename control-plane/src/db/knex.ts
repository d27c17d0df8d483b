// Database connection: MySQL/MariaDB through mysql2 in production and tests,
// SQLite through Node's built-in node:sqlite (sqlite-client.ts) for `make dev` and tests.
import knexFactory, { type Knex } from "knex";
import { migrationSource } from "./migrations/index.js";
import type { Database } from "./node-sqlite.js";
import { NodeSqliteClient } from "./sqlite-client.js";
import { isStoreUnavailable } from "./unavailable.js";

export type Db = Knex;

export function openDb(url: string): Db {
  if (url.startsWith("sqlite://")) {
    const filename = url.slice("sqlite://".length);
    return knexFactory({
      client: NodeSqliteClient,
      connection: { filename },
      useNullAsDefault: true,
      pool: {
        min: 1,
        max: 1,
        // WAL + a busy timeout keep the admin CLI and a running server from
        // tripping over each other's locks.
        afterCreate: (conn: Database, done: (err: Error | null) => void) => {
          conn.pragma("journal_mode = WAL");
          conn.pragma("busy_timeout = 5000");
          conn.pragma("foreign_keys = ON");
          done(null);
        },
      },
    });
  }
  const u = new URL(url);
  return knexFactory({
    client: "mysql2",
    connection: {
      host: u.hostname,
      port: Number(u.port || 3306),
      user: decodeURIComponent(u.username),
      password: decodeURIComponent(u.password),
      database: u.pathname.replace(/^\//, ""),
      charset: "utf8mb4",
      supportBigNumbers: true,
      bigNumberStrings: false,
      // Fail fast when the database is down instead of queueing requests.
      connectTimeout: 5000,
      // The audit append sends its writes in one round trip (audit-log.ts). Every
      // statement here is built by knex with bound parameters, never from strings;
      // test/sql-stacked-input.test.ts shows stacked input stays data.
      multipleStatements: true,
      // knex sends every statement with query(), never execute(), so mysql2's per-connection
      // cache of prepared statements stays empty; at its default size (16,000) it is four arrays
      // made full at the connect, 0.5 MB per connection: 15 MB for a pool of 30 (a gateway's
      // heap snapshot). The cache's size only bounds statements a connection keeps prepared.
      maxPreparedStatements: 16,
    },
    // 30, not knex's 10: under load every request waited on the pool, not the CPU or the
    // database (bench/README.md, issue 17). Two processes an instance pair stay far below
    // MariaDB's default max_connections (151); many instances may need it raised.
    pool: { min: 1, max: 30, afterCreate: backslashEscapes },
    acquireConnectionTimeout: 5000,
  });
}

/**
 * mysql2 escapes bound values client side with backslashes (\\' for a quote).
 * Under a server sql_mode with NO_BACKSLASH_ESCAPES that quote would end the
 * string literal, and with multipleStatements a value could then run its own
 * statements: each connection turns the mode off for its session.
 */
function backslashEscapes(
  conn: { query(sql: string, cb: (err: Error | null) => void): void },
  done: (err: Error | null, conn: unknown) => void,
): void {
  conn.query(
    "SET SESSION sql_mode = TRIM(BOTH ',' FROM REPLACE(REPLACE(@@SESSION.sql_mode, 'NO_BACKSLASH_ESCAPES', ''), ',,', ','))",
    (err) => done(err, conn),
  );
}

export async function migrate(db: Db): Promise<void> {
  await db.migrate.latest({ migrationSource });
}

export const isSqlite = (db: Db): boolean => db.client.config.client === NodeSqliteClient;

/**
 * Several instances may start at once; knex's migration lock makes all but one
 * fail with MigrationLocked, so wait and retry until the winner is done.
 */
export async function migrateWithRetry(
  db: Db,
  log: { warn(o: object, m: string): void },
  deadlineMs = 60_000,
): Promise<void> {
  const until = Date.now() + deadlineMs;
  for (let attempt = 1; ; attempt++) {
    try {
      await migrate(db);
      return;
    } catch (err) {
      const locked = (err as { name?: string }).name === "MigrationLocked";
      const unreachable = isStoreUnavailable(err);
      if ((!locked && !unreachable) || Date.now() > until) throw err;
      log.warn(
        { attempt, reason: locked ? "migration lock held" : "database unreachable" },
        "migrate: retrying",
      );
      await new Promise((r) => setTimeout(r, Math.min(200 * attempt, 2000)));
    }
  }
}

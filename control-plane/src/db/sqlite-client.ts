// The knex client for SQLite: knex's own better-sqlite3 client (its SQL compiler, transactions
// and response handling, unchanged) with its driver swapped for node-sqlite.ts, Node's built-in
// SQLite shaped as better-sqlite3. knex takes a client class in place of a client name.
import type { Knex } from "knex";
import { Database } from "./node-sqlite.js";

// knex ships its dialects untyped; each is a Knex.Client.
const BetterSqlite3Client = require("knex/lib/dialects/better-sqlite3") as typeof Knex.Client;

export class NodeSqliteClient extends BetterSqlite3Client {
  /** Called once by knex's Client constructor; better-sqlite3's would require the addon. */
  _driver(): typeof Database {
    return Database;
  }
}

Object.assign(NodeSqliteClient.prototype, { driverName: "node:sqlite" });

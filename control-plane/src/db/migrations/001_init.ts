// Initial schema: tenants, automation keys, servers, join tokens, operations and
// the audit trail. Ids are UUID strings; times are epoch milliseconds (BIGINT) so
// the same schema runs on MySQL/MariaDB and SQLite. Secrets are stored as SHA-256.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("tenants", (t) => {
    uuid(t, "id").primary();
    t.string("name", 128).notNullable().unique();
    t.bigInteger("created_at").notNullable();
  });

  // Head of each tenant's audit hash chain, locked while an event is appended.
  // A table of its own, not columns of tenants: inserting any row with a foreign
  // key to tenants takes a shared lock on the tenant row, and upgrading that to
  // the exclusive lock of the append deadlocks concurrent transactions.
  await knex.schema.createTable("audit_chain_heads", (t) => {
    uuid(t, "tenant_id").primary();
    t.string("head", 64).nullable();
    t.bigInteger("seq").notNullable().defaultTo(0);
  });

  await knex.schema.createTable("automation_keys", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("name", 128).notNullable();
    t.string("token_hash", 64).notNullable().unique();
    t.string("token_hint", 12).notNullable();
    t.text("servers").notNullable(); // JSON array of server ids; [] = all
    t.text("operations").notNullable(); // JSON array; [] = all
    t.text("allowed_credential_ids").notNullable();
    t.text("ip_allowlist").notNullable();
    t.integer("rate_limit").notNullable().defaultTo(100);
    t.bigInteger("expires_at").nullable();
    t.bigInteger("revoked_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("servers", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("name", 128).notNullable();
    t.string("agent_credential_hash", 64).nullable().unique();
    t.string("hostname", 255).nullable();
    t.string("agent_version", 64).nullable();
    t.string("boot_id", 64).nullable();
    t.bigInteger("last_seen_at").nullable();
    t.bigInteger("created_at").notNullable();
    t.unique(["tenant_id", "name"]);
  });

  await knex.schema.createTable("join_tokens", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("token_hash", 64).notNullable().unique();
    t.string("server_name", 128).notNullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("used_at").nullable();
    uuid(t, "server_id").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("operations", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    uuid(t, "server_id").notNullable().references("servers.id");
    t.string("operation_type", 32).notNullable();
    t.string("status", 16).notNullable(); // running | completed | failed | timeout
    // Delivery state: pending -> dispatched -> acked -> finished.
    t.string("delivery", 16).notNullable();
    uuid(t, "key_id").nullable();
    t.string("run_id", 255).nullable();
    t.integer("exit_code").nullable();
    t.text("stdout", "mediumtext").nullable();
    t.text("stderr", "mediumtext").nullable();
    t.integer("duration_ms").nullable();
    t.text("error").nullable();
    t.bigInteger("lease_expires_at").nullable();
    t.bigInteger("deadline_at").nullable();
    t.bigInteger("started_at").notNullable();
    t.bigInteger("completed_at").nullable();
    t.index(["status", "lease_expires_at"]);
    t.index(["status", "deadline_at"]);
    t.index(["tenant_id", "run_id"]);
  });

  await knex.schema.createTable("audit_events", (t) => {
    t.bigIncrements("id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.bigInteger("seq").notNullable();
    t.string("event_type", 64).notNullable();
    uuid(t, "operation_id").nullable();
    uuid(t, "key_id").nullable();
    uuid(t, "server_id").nullable();
    t.string("run_id", 255).nullable();
    t.text("payload", "mediumtext").notNullable(); // canonical JSON
    t.string("prev_hash", 64).nullable();
    t.string("hash", 64).notNullable();
    t.bigInteger("created_at").notNullable();
    t.unique(["tenant_id", "seq"]);
    t.index(["operation_id"]);
    t.index(["tenant_id", "run_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    "audit_events",
    "operations",
    "join_tokens",
    "servers",
    "automation_keys",
    "tenants",
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}

// Regular API keys (`X-API-Key: rck_...`) and the shared rate-limit counters.
// Counters are rows, not process memory, so a limit is exact across several api
// instances sharing the database: one row per key, window length and window start.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("api_keys", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("name", 128).notNullable();
    t.string("token_hash", 64).notNullable().unique();
    t.string("token_hint", 12).notNullable();
    t.bigInteger("revoked_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("rate_limit_counters", (t) => {
    uuid(t, "key_id").notNullable();
    t.integer("window_seconds").notNullable();
    t.bigInteger("window_start").notNullable();
    t.integer("count").notNullable();
    // Set by the first rejection of the window, so a flood writes one audit event.
    t.boolean("hit_recorded").notNullable().defaultTo(false);
    t.primary(["key_id", "window_seconds", "window_start"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("rate_limit_counters");
  await knex.schema.dropTableIfExists("api_keys");
}

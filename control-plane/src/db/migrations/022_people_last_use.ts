// Issue 31 (defects 10, 11): what the people pages show besides an IP and a
// creation time. A web session keeps the browser's User-Agent (shown as "Chrome
// on Linux") and when it was last used; API and automation keys when they were
// last used (each written at most once a minute per key and api process:
// auth/last-use.ts); an invite can be revoked before it is used.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("web_sessions", (t) => {
    t.string("user_agent", 255).nullable();
    t.bigInteger("last_used_at").nullable();
  });
  await knex.schema.alterTable("api_keys", (t) => {
    t.bigInteger("last_used_at").nullable();
  });
  await knex.schema.alterTable("automation_keys", (t) => {
    t.bigInteger("last_used_at").nullable();
  });
  await knex.schema.alterTable("user_invites", (t) => {
    t.bigInteger("revoked_at").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("user_invites", (t) => {
    t.dropColumn("revoked_at");
  });
  await knex.schema.alterTable("automation_keys", (t) => {
    t.dropColumn("last_used_at");
  });
  await knex.schema.alterTable("api_keys", (t) => {
    t.dropColumn("last_used_at");
  });
  await knex.schema.alterTable("web_sessions", (t) => {
    t.dropColumn("user_agent");
    t.dropColumn("last_used_at");
  });
}

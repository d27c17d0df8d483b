// Refusals of a known key (revoked, expired, out of scope, IP) count in the key's
// rate-limit window like any request, and are audited once per window: the flag
// is set by the first refusal of the window, `refused` counts them all (it is
// reported with the window's rate_limit.hit).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("rate_limit_counters", (t) => {
    t.integer("refused").notNullable().defaultTo(0);
    t.boolean("refusal_recorded").notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("rate_limit_counters", (t) => {
    t.dropColumn("refused");
    t.dropColumn("refusal_recorded");
  });
}

// The audit chain becomes keyed (HMAC-SHA256, audit/chain-key.ts). Events
// already written keep the plain SHA-256 they were chained with and are marked
// so (`hash_alg` = "sha256"): rehashing them would need the key here and would
// vouch for rows nobody checked. `admin audit verify` accepts them only as the
// start of a tenant's chain, before its first keyed event, and counts them.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("audit_events", (t) => {
    t.string("hash_alg", 16).notNullable().defaultTo("sha256");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("audit_events", (t) => {
    t.dropColumn("hash_alg");
  });
}

// Issue 30, finding 14: a captured signed webhook body replayed under a new
// X-GitHub-Delivery id. Each recorded delivery's body digest (SHA-256) is kept
// for GitHub's redelivery window (github/deliveries.ts REPLAY_WINDOW_MS); the
// same body under another id within it is a replay, recorded but not processed.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("github_delivery_digests", (t) => {
    t.string("digest", 64).primary();
    /** The delivery that first brought this body (in the window). */
    t.string("delivery_id", 64).notNullable();
    t.bigInteger("received_at").notNullable().index();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("github_delivery_digests");
}

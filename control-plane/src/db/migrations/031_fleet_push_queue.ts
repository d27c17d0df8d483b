// fleet_push_queue: a push to a fleet application (one with a placement) that
// came while a rollout of the application ran waits here, and is rolled out when
// that rollout ends (webhooks/push-queue.ts). One row per application: a newer
// push replaces the waiting one, which is then never rolled out. `request` holds
// what the push's rollout is started with (its actor, audit fields, commit and
// the commit status row to make), never a secret.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("fleet_push_queue", (t) => {
    t.string("application_id", 36).primary();
    t.string("tenant_id", 36).notNullable();
    t.string("commit_sha", 64).notNullable();
    t.string("delivery_id", 64).notNullable();
    /** The rollout it waits for (the one running when it came). */
    t.string("behind_rollout_id", 36).notNullable();
    t.text("request", "mediumtext").notNullable();
    t.bigInteger("queued_at").notNullable();
    /** Taken by an api instance starting its rollout until then (Unix ms); null while it waits. */
    t.bigInteger("claimed_until").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("fleet_push_queue");
}

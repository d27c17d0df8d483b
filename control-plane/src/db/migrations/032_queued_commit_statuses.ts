// queued_commit_statuses: what a forge is told about a push to a fleet application
// that waits for the running rollout (fleet_push_queue, migration 031): `pending`
// while it waits, `error` when a newer push took its place or it could not be rolled
// out. A queued push has no deployment or rollout yet, so the commit status tables
// (keyed by deployment) cannot hold it; once its rollout starts, the rollout's row
// there takes over and this one goes (webhooks/queued-statuses.ts).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("queued_commit_statuses", (t) => {
    t.string("application_id", 36).notNullable();
    t.string("commit_sha", 64).notNullable();
    t.primary(["application_id", "commit_sha"]);
    /** Which forge's reporter tells it: github_commit_statuses or forge_commit_statuses. */
    t.string("status_table", 32).notNullable();
    /** The status row's forge fields as JSON (installation and repository, or connection and project). */
    t.text("target").notNullable();
    /** The status context, `relayctl/<application name>`, kept: the application may be gone by the end. */
    t.string("context", 300).notNullable();
    /** pending or error. */
    t.string("state", 16).notNullable();
    t.string("description", 140).notNullable();
    /** The dashboard page it links to, under /app/ (the rollout waited for, or the application); null: none. */
    t.string("link", 200).nullable();
    t.string("reported_state", 16).nullable();
    t.integer("failures").notNullable().defaultTo(0);
    t.bigInteger("created_at").notNullable();
    t.index(["status_table"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("queued_commit_statuses");
}

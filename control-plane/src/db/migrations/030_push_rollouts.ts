// github_commit_statuses.rollout_id and forge_commit_statuses.rollout_id: a push
// to a fleet application (one with a placement) deploys it as a rollout
// (fleets/rollouts.ts), and its commit status follows the rollout's operation,
// not one server's deployment. deployment_id (the key) is then the rollout's
// first planned deployment. Nullable, so a control plane of the version before,
// still running during a rolling upgrade, writes its rows without it.
import type { Knex } from "knex";

const TABLES = ["github_commit_statuses", "forge_commit_statuses"];

export async function up(knex: Knex): Promise<void> {
  for (const table of TABLES)
    await knex.schema.alterTable(table, (t) => {
      t.string("rollout_id", 36).nullable();
    });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of TABLES)
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn("rollout_id");
    });
}

// The structured outcome of an operation beside its stdout (a route sync's
// per-route report today, a deployment's tomorrow): the canonical proto JSON of
// relayctl.agent.v1.JobResult's `detail`, so stdout stays what a person reads.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("operations", (t) => {
    t.text("result_detail", "mediumtext").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("operations", (t) => {
    t.dropColumn("result_detail");
  });
}

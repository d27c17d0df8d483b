// An application may pin its port: with `pin_port`, an external-deploy sync entry
// must name the application's own `container_port` (any other is a sync `errors`
// entry, refused before anything reaches the agent). Off for existing rows.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.boolean("pin_port").notNullable().defaultTo(false);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.dropColumn("pin_port");
  });
}

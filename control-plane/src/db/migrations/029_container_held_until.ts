// application_containers.held_until: until when the agent holds the application's
// crash loop (podman: the container stopped, started again then; agent
// containers/crash-hold.ts), Unix ms; null when not held. Nullable, so a control
// plane of the version before, still running during a rolling upgrade, writes its
// rows without it.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("application_containers", (t) => {
    t.bigInteger("held_until").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("application_containers", (t) => {
    t.dropColumn("held_until");
  });
}

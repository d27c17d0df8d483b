// The container engine each server's agent reports (agent.proto EngineStatus,
// in Hello and on every change): GET /api/servers shows it as `engine`, so a
// person sees why a deployment cannot run before trying one. All null until
// the agent first reports (an agent older than this never does).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    // docker or podman; "" when auto found none working.
    t.string("engine_name", 16).nullable();
    t.string("engine_version", 64).nullable();
    t.boolean("engine_ok").nullable();
    // How it was chosen, or each engine's reason and the fix (capped by the gateway).
    t.text("engine_detail").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    t.dropColumn("engine_detail");
    t.dropColumn("engine_ok");
    t.dropColumn("engine_version");
    t.dropColumn("engine_name");
  });
}

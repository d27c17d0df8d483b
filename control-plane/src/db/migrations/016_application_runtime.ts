// The running application (issue 29): what its server's agent last reported of
// its container (agent.proto ContainerReport), and the cleanups a deletion
// leaves for an agent that was away.
// - application_containers: one row per application that has a container on its
//   server; GET /api/applications shows it as `container`. No row: nothing
//   reported (not deployed, or an agent older than this).
// - application_cleanups: an application deleted whose containers and images
//   may still be on its server. Written with the deletion; removed when the
//   agent reports the cleanup done (gateway/cleanups.ts), so an agent offline at
//   the deletion is sent it at its next Hello.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("application_containers", (t) => {
    t.string("application_id", 36).primary();
    t.string("server_id", 36).notNullable().index();
    t.string("container_name", 255).notNullable();
    // running, restarting, crashed, stopped, crash_loop.
    t.string("state", 16).notNullable();
    t.integer("exit_code").nullable();
    t.integer("restart_count").notNullable().defaultTo(0);
    // Unix epoch ms (the agent's clock); null when never / unknown.
    t.bigInteger("last_crash_at").nullable();
    t.bigInteger("since").nullable();
    t.bigInteger("reported_at").notNullable();
  });
  await knex.schema.createTable("application_cleanups", (t) => {
    t.string("application_id", 36).primary();
    t.string("tenant_id", 36).notNullable();
    t.string("server_id", 36).notNullable().index();
    t.string("application_name", 128).notNullable();
    t.bigInteger("requested_at").notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("application_cleanups");
  await knex.schema.dropTable("application_containers");
}

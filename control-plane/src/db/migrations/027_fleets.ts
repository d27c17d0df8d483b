// Fleets (issue 33): an application placed on several servers is deployed as a
// rollout, one deployment per server.
// - servers.labels: JSON object of k=v labels (fleets/labels.ts), matched by an
//   application's placement selector.
// - applications.placement: JSON {servers: [...]} or {selector: "k=v,..."}; null
//   is the single server of server_id, as before. applications.rollout_strategy:
//   the application's default strategy (fleets/strategy.ts); null: defaults.
// - rollouts: one per fleet deploy or rollback; active_application_id is the
//   application's id while the rollout runs and null after, so its unique index
//   lets one rollout of an application run at a time across api instances.
// - rollout_servers: each target server's state in its rollout.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    t.text("labels").nullable();
  });
  await knex.schema.alterTable("applications", (t) => {
    t.text("placement").nullable();
    t.text("rollout_strategy").nullable();
  });
  await knex.schema.createTable("rollouts", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable();
    uuid(t, "application_id").notNullable();
    uuid(t, "active_application_id").nullable().unique();
    uuid(t, "operation_id").notNullable().unique();
    t.string("kind", 16).notNullable(); // deploy | rollback
    t.text("strategy").notNullable();
    t.string("status", 16).notNullable(); // running | succeeded | halted | failed
    t.text("detail").nullable();
    t.string("run_id", 255).nullable();
    t.bigInteger("deadline_at").notNullable();
    t.bigInteger("created_at").notNullable();
    t.bigInteger("finished_at").nullable();
    t.index(["application_id", "created_at"]);
  });
  await knex.schema.createTable("rollout_servers", (t) => {
    uuid(t, "rollout_id").notNullable();
    uuid(t, "server_id").notNullable();
    t.string("server_name", 128).notNullable();
    t.integer("position").notNullable();
    t.integer("batch").notNullable();
    // pending | deploying | succeeded | failed | rolling_back | rolled_back | rollback_failed | skipped
    t.string("state", 16).notNullable();
    uuid(t, "deployment_id").nullable();
    uuid(t, "rollback_deployment_id").nullable();
    t.string("failed_step", 32).nullable();
    t.text("detail").nullable();
    t.bigInteger("updated_at").notNullable();
    t.primary(["rollout_id", "server_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("rollout_servers");
  await knex.schema.dropTable("rollouts");
  await knex.schema.alterTable("applications", (t) => {
    t.dropColumn("rollout_strategy");
    t.dropColumn("placement");
  });
  await knex.schema.alterTable("servers", (t) => {
    t.dropColumn("labels");
  });
}

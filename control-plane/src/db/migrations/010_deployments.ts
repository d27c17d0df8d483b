// Deployments (DESIGN.md "Deployments"). An application grows a source (a git
// repository and deploy branch, an optional sealed HTTPS credential), a build
// (JSON: {"type":"dockerfile",...} or {"type":"image",...}, so a compose type is
// a new value, not a migration), a health check and auto-deploy; its env vars
// are sealed rows of their own. A deployment is an operation (operation_type
// `deploy`) with a row beside it: `seq` orders one application's deployments
// (request order), steps hold the agent's final report, and progress holds what
// the agent streamed while it ran (the live log).
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.string("git_repository", 2048).nullable();
    t.string("deploy_branch", 255).notNullable().defaultTo("main");
    t.string("git_username", 255).nullable();
    t.text("git_password_sealed").nullable();
    t.bigInteger("git_credential_updated_at").nullable();
    t.text("build").nullable();
    t.string("health_check_path", 1024).notNullable().defaultTo("/");
    t.integer("health_check_timeout_seconds").notNullable().defaultTo(30);
    t.boolean("auto_deploy").notNullable().defaultTo(false);
  });

  await knex.schema.createTable("application_env", (t) => {
    uuid(t, "application_id").notNullable();
    t.string("name", 255).notNullable();
    t.text("value_sealed").notNullable();
    t.bigInteger("updated_at").notNullable();
    t.primary(["application_id", "name"]);
  });

  await knex.schema.createTable("deployments", (t) => {
    t.bigIncrements("seq").primary();
    uuid(t, "id").notNullable().unique();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    uuid(t, "application_id").notNullable();
    uuid(t, "server_id").notNullable();
    uuid(t, "operation_id").notNullable().unique();
    t.string("trigger", 16).notNullable(); // api | dashboard | cli | webhook
    t.string("actor_type", 32).notNullable();
    t.string("actor_id", 64).nullable();
    t.string("actor_name", 255).nullable();
    t.string("commit_ref", 255).notNullable();
    t.string("commit_sha", 64).nullable();
    t.text("commit_message").nullable();
    t.string("commit_author", 512).nullable();
    t.string("image", 1024).nullable();
    t.string("container_name", 255).nullable();
    t.integer("host_port").nullable();
    t.string("upstream", 512).nullable();
    t.string("proxy", 16).nullable();
    t.string("failed_step", 32).nullable();
    t.bigInteger("dispatched_at").nullable();
    t.bigInteger("created_at").notNullable();
    t.index(["application_id", "seq"]);
  });

  await knex.schema.createTable("deployment_steps", (t) => {
    uuid(t, "deployment_id").notNullable();
    t.integer("position").notNullable();
    t.string("name", 32).notNullable();
    t.string("status", 16).notNullable();
    t.bigInteger("started_at").nullable();
    t.bigInteger("ended_at").nullable();
    t.text("log", "mediumtext").notNullable();
    t.primary(["deployment_id", "name"]);
  });

  await knex.schema.createTable("deployment_progress", (t) => {
    uuid(t, "deployment_id").notNullable();
    t.integer("seq").notNullable();
    t.string("step", 32).notNullable();
    t.string("status", 16).notNullable();
    t.text("log").notNullable();
    t.bigInteger("at").notNullable();
    t.primary(["deployment_id", "seq"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ["deployment_progress", "deployment_steps", "deployments", "application_env"]) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.schema.alterTable("applications", (t) => {
    for (const c of [
      "git_repository",
      "deploy_branch",
      "git_username",
      "git_password_sealed",
      "git_credential_updated_at",
      "build",
      "health_check_path",
      "health_check_timeout_seconds",
      "auto_deploy",
    ])
      t.dropColumn(c);
  });
}

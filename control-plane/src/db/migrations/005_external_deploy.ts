// External deploy: applications (a container on a server, reached through the
// server's reverse proxy at its bound domain names), external-deploy sessions
// (the rds_ token stored as SHA-256 only) and each application's route state:
// who synced it last and when (the 30 s conflict guard) and what was applied.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("applications", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    uuid(t, "server_id").notNullable().references("servers.id");
    t.string("name", 128).notNullable();
    t.string("linked_container_name", 255).notNullable();
    t.integer("container_port").notNullable();
    t.text("fqdns").notNullable(); // JSON array, sorted, lower case
    t.bigInteger("created_at").notNullable();
    t.bigInteger("updated_at").notNullable();
    t.unique(["tenant_id", "name"]);
    t.index(["tenant_id", "linked_container_name"]);
    t.index(["server_id"]);
  });

  // One row per (server, domain): a domain routes to one application per proxy.
  await knex.schema.createTable("application_fqdns", (t) => {
    uuid(t, "server_id").notNullable();
    t.string("fqdn", 253).notNullable();
    uuid(t, "application_id").notNullable();
    t.primary(["server_id", "fqdn"]);
    t.index(["application_id"]);
  });

  await knex.schema.createTable("external_deploy_sessions", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    uuid(t, "key_id").notNullable();
    t.string("token_hash", 64).notNullable().unique();
    t.text("application_ids").notNullable(); // JSON array
    t.text("container_names").notNullable(); // JSON array, as requested
    t.string("workflow_run_id", 255).nullable();
    t.string("commit_sha", 255).nullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("deleted_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("application_route_state", (t) => {
    uuid(t, "application_id").primary();
    uuid(t, "last_session_id").nullable();
    t.bigInteger("last_synced_at").nullable();
    t.string("signature_hash", 80).nullable();
    t.integer("container_port").nullable();
    t.string("image_tag", 512).nullable();
    t.text("synced_fqdns").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    "application_route_state",
    "external_deploy_sessions",
    "application_fqdns",
    "applications",
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}

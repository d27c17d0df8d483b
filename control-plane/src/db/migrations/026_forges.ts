// GitLab and Gitea/Forgejo (issue 32, "Beyond GitHub"). A forge connection is
// a tenant's: its webhook URL names it (/webhooks/<kind>/<id>), and its secret
// proves a delivery is the forge's. GitLab sends its secret as X-Gitlab-Token,
// which is compared, so only its SHA-256 is kept; Gitea and Forgejo sign the
// raw body with HMAC-SHA256, which needs the secret itself, so it is sealed
// with the master key, as is the API token (clone and commit statuses).
// Deliveries are stored before they are answered, unique per connection and
// delivery id (the dedupe); forge_commit_statuses is what is owed to the forge
// about each push deployment. The (application, commit) guard of pushes is
// GitHub's github_push_deployments, shared: one deployment per commit whatever
// sent it.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("forge_connections", (t) => {
    t.string("id", 36).primary();
    t.string("tenant_id", 36).notNullable().references("tenants.id");
    /** gitlab | gitea | forgejo */
    t.string("kind", 16).notNullable();
    t.string("name", 128).notNullable();
    t.string("base_url", 512).notNullable();
    /** GitLab: hex SHA-256 of the X-Gitlab-Token secret. */
    t.string("webhook_secret_sha256", 64).nullable();
    /** Gitea/Forgejo: the HMAC secret, sealed. */
    t.text("webhook_secret_sealed").nullable();
    t.text("api_token_sealed").notNullable();
    t.string("created_by", 255).nullable();
    t.bigInteger("created_at").notNullable();
    t.unique(["tenant_id", "name"]);
  });

  await knex.schema.createTable("forge_deliveries", (t) => {
    t.bigIncrements("seq").primary();
    t.string("connection_id", 36).notNullable();
    t.string("tenant_id", 36).notNullable();
    /** X-Gitlab-Event-UUID or X-Gitea-Delivery / X-Forgejo-Delivery. */
    t.string("id", 64).notNullable();
    t.string("event", 64).notNullable();
    t.string("action", 64).nullable();
    t.specificType("payload_gz", "longblob").notNullable();
    /** pending | processing | done | failed */
    t.string("status", 16).notNullable();
    t.integer("attempts").notNullable().defaultTo(0);
    t.bigInteger("claimed_until").nullable();
    t.text("outcome").nullable();
    t.bigInteger("received_at").notNullable();
    t.bigInteger("processed_at").nullable();
    t.unique(["connection_id", "id"]);
    t.index(["status", "seq"]);
    t.index(["connection_id", "seq"]);
  });

  await knex.schema.createTable("forge_commit_statuses", (t) => {
    t.string("deployment_id", 36).primary();
    t.string("connection_id", 36).notNullable();
    t.string("project", 512).notNullable();
    t.string("commit_sha", 64).notNullable();
    /** The last state the forge was told, in its own words. */
    t.string("reported_state", 16).nullable();
    /** Failed posts of the current state: given up after a few. */
    t.integer("failures").notNullable().defaultTo(0);
    t.bigInteger("created_at").notNullable();
    t.index(["reported_state"]);
  });

  await knex.schema.alterTable("applications", (t) => {
    t.string("forge_connection_id", 36).nullable().index();
    /** The project's path (group/sub/repo), or GitLab's numeric project id. */
    t.string("forge_project", 512).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.dropIndex(["forge_connection_id"]);
    t.dropColumn("forge_project");
    t.dropColumn("forge_connection_id");
  });
  for (const table of ["forge_commit_statuses", "forge_deliveries", "forge_connections"])
    await knex.schema.dropTableIfExists(table);
}

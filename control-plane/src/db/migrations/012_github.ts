// The GitHub App integration (DESIGN.md "Webhooks"). Deliveries are stored
// before they are answered and processed from here (so a restart loses none);
// the delivery id is the primary key, so a redelivery is a no-op. Installations
// carry no tenant until one is bound through the setup URL with a single-use
// state (github_install_states). Repositories are keyed by GitHub's numeric id,
// which survives renames and transfers; an application follows one by that id.
// github_push_deployments is the guard behind "one deployment per (application,
// commit)", github_commit_statuses what is owed to GitHub about each.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("github_installations", (t) => {
    t.bigInteger("id").primary(); // GitHub's installation id
    t.string("tenant_id", 36).nullable().references("tenants.id");
    t.string("account_login", 255).notNullable();
    t.string("account_type", 32).notNullable();
    t.bigInteger("suspended_at").nullable();
    t.bigInteger("deleted_at").nullable();
    t.bigInteger("bound_at").nullable();
    t.bigInteger("created_at").notNullable();
    t.bigInteger("updated_at").notNullable();
    t.index(["tenant_id"]);
  });

  await knex.schema.createTable("github_repositories", (t) => {
    t.bigInteger("id").primary(); // GitHub's repository id
    t.bigInteger("installation_id").nullable();
    t.string("full_name", 512).notNullable();
    t.string("default_branch", 255).nullable();
    t.boolean("private").notNullable().defaultTo(true);
    t.boolean("archived").notNullable().defaultTo(false);
    t.string("clone_url", 2048).nullable();
    /** Set when the installation lost access or the repository was deleted. */
    t.bigInteger("removed_at").nullable();
    t.bigInteger("updated_at").notNullable();
    t.index(["installation_id"]);
  });

  await knex.schema.createTable("github_deliveries", (t) => {
    t.bigIncrements("seq").primary();
    t.string("id", 64).notNullable().unique(); // X-GitHub-Delivery
    t.string("event", 64).notNullable();
    t.string("action", 64).nullable();
    t.bigInteger("installation_id").nullable();
    t.bigInteger("repository_id").nullable();
    t.string("tenant_id", 36).nullable();
    // gzip of the raw body: GitHub sends up to 25 MB, more than MariaDB's
    // default max_allowed_packet (16 MB) lets one INSERT carry as text.
    t.specificType("payload_gz", "longblob").notNullable();
    /** pending | processing | done | failed */
    t.string("status", 16).notNullable();
    t.integer("attempts").notNullable().defaultTo(0);
    t.bigInteger("claimed_until").nullable();
    /** JSON: what the delivery did, or why it did nothing. */
    t.text("outcome").nullable();
    t.bigInteger("received_at").notNullable();
    t.bigInteger("processed_at").nullable();
    t.index(["status", "seq"]);
    t.index(["tenant_id", "seq"]);
    t.index(["installation_id"]);
  });

  await knex.schema.createTable("github_install_states", (t) => {
    t.string("nonce", 64).primary();
    t.string("tenant_id", 36).notNullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("used_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("github_push_deployments", (t) => {
    t.string("application_id", 36).notNullable();
    t.string("commit_sha", 64).notNullable();
    /** The push's `before`: a later delivery of that commit is stale. */
    t.string("before_sha", 64).nullable();
    t.string("deployment_id", 36).nullable();
    t.string("delivery_id", 64).notNullable();
    t.bigInteger("created_at").notNullable();
    t.primary(["application_id", "commit_sha"]);
    t.index(["application_id", "before_sha"]);
  });

  await knex.schema.createTable("github_commit_statuses", (t) => {
    t.string("deployment_id", 36).primary();
    t.bigInteger("installation_id").notNullable();
    t.bigInteger("repository_id").notNullable();
    t.string("commit_sha", 64).notNullable();
    /** The last state GitHub was told: pending, success, failure, error. */
    t.string("reported_state", 16).nullable();
    t.bigInteger("created_at").notNullable();
    t.index(["reported_state"]);
  });

  await knex.schema.alterTable("applications", (t) => {
    t.bigInteger("github_repository_id").nullable().index();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.dropIndex(["github_repository_id"]);
    t.dropColumn("github_repository_id");
  });
  for (const table of [
    "github_commit_statuses",
    "github_push_deployments",
    "github_install_states",
    "github_deliveries",
    "github_repositories",
    "github_installations",
  ])
    await knex.schema.dropTableIfExists(table);
}

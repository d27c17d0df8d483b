// Preview environments (issue 32): a preview IS an application, a child of the
// production one (preview_of), so the whole pipeline (deploy, route, releases,
// logs, cleanup) works on it unchanged. The parent keeps its preview settings
// as JSON (`previews`); a child records where it came from (a pull request's
// number, head, fork or not, its web URL) and when it was last active (the cap
// stops the idlest first). The preview env set is production's names with
// preview values, sealed like application_env, in a table of its own.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.text("previews").nullable();
    uuid(t, "preview_of").nullable();
    t.string("preview_key", 64).nullable();
    t.integer("preview_number").nullable();
    t.string("preview_source", 16).nullable();
    t.string("preview_head_ref", 255).nullable();
    t.string("preview_head_sha", 64).nullable();
    t.boolean("preview_from_fork").notNullable().defaultTo(false);
    t.string("preview_url", 2048).nullable();
    t.bigInteger("preview_last_activity_at").nullable();
    /** The forge's id of the one pull request comment kept up to date. */
    t.bigInteger("preview_comment_id").nullable();
    t.unique(["preview_of", "preview_key"]);
  });
  await knex.schema.createTable("application_preview_env", (t) => {
    uuid(t, "application_id").notNullable();
    t.string("name", 255).notNullable();
    t.text("value_sealed").notNullable();
    t.bigInteger("updated_at").notNullable();
    t.primary(["application_id", "name"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("application_preview_env");
  await knex.schema.alterTable("applications", (t) => {
    t.dropUnique(["preview_of", "preview_key"]);
    for (const c of [
      "preview_comment_id",
      "preview_last_activity_at",
      "preview_url",
      "preview_from_fork",
      "preview_head_sha",
      "preview_head_ref",
      "preview_source",
      "preview_number",
      "preview_key",
      "preview_of",
      "previews",
    ])
      t.dropColumn(c);
  });
}

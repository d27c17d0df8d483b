// Which pushes of a GitHub-linked repository deploy an application (issue 32):
// deploy_tags, a pattern such as `v*`: tag pushes matching it deploy the tag's
// commit; watch_paths, globs (JSON array) such as `services/api/**`: a push to
// the deploy branch deploys only when a changed file matches one (monorepos).
// Both null: branch pushes only, whatever they change (as before).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.string("deploy_tags", 255).nullable();
    t.text("watch_paths").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("applications", (t) => {
    t.dropColumn("watch_paths");
    t.dropColumn("deploy_tags");
  });
}

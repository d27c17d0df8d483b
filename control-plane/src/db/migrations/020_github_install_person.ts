// Issue 30, finding 1: an install link's state names the person who made it
// (github_install_states.user_id), and /github/setup completes only in that
// person's signed-in browser. A state issued before this has no person and is
// refused (a new link is one click).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("github_install_states", (t) => {
    t.string("user_id", 36).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("github_install_states", (t) => {
    t.dropColumn("user_id");
  });
}

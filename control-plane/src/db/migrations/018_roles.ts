// Roles (issue 30, finding 9): people are owners, deployers or viewers
// (auth/roles.ts), and an owner may grant one person `exec` (commands on
// servers and registry logins) with users.can_exec. The old `member` could
// deploy, so members (and pending invites as members) become deployers: they
// keep deploying and lose only exec and registry login, which now need the grant.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.boolean("can_exec").notNullable().defaultTo(false);
  });
  await knex("users").where({ role: "member" }).update({ role: "deployer" });
  await knex("user_invites").where({ role: "member" }).update({ role: "deployer" });
}

export async function down(knex: Knex): Promise<void> {
  await knex("users").whereIn("role", ["deployer", "viewer"]).update({ role: "member" });
  await knex("user_invites").whereIn("role", ["deployer", "viewer"]).update({ role: "member" });
  await knex.schema.alterTable("users", (t) => {
    t.dropColumn("can_exec");
  });
}

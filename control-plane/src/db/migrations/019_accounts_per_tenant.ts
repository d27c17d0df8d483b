// Accounts per tenant (issue 30, finding 6): an e-mail address was unique across
// tenants, so an invite to an address used in another tenant answered 409 (a
// probe of other tenants' people) and one tenant could squat an address before
// its real owner was invited elsewhere. Now an address is unique within its
// tenant only; the same person in two tenants has two accounts (two passwords,
// two audit trails), and sign-in finds the account by e-mail and password.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.dropUnique(["email"]);
    t.unique(["tenant_id", "email"]);
    // Sign-in looks an address up across tenants.
    t.index(["email"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("users", (t) => {
    t.dropIndex(["email"]);
    t.dropUnique(["tenant_id", "email"]);
    t.unique(["email"]);
  });
}

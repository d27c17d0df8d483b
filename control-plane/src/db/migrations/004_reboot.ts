// Server reboot: a server's binding to a cloud provider (the API token sealed
// with the master key, registry/crypto.ts, never stored in plaintext), and the
// boot id a reboot operation started from (it completes when a Hello carries
// another one).
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("server_providers", (t) => {
    uuid(t, "server_id").primary().references("servers.id");
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("provider", 32).notNullable(); // hetzner | digitalocean
    t.string("provider_server_id", 64).notNullable();
    // base64(iv[12] | tag[16] | ciphertext)
    t.text("token_ciphertext").notNullable();
    t.bigInteger("created_at").notNullable();
  });
  await knex.schema.alterTable("operations", (t) => {
    t.string("pre_boot_id", 64).nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("operations", (t) => {
    t.dropColumn("pre_boot_id");
  });
  await knex.schema.dropTableIfExists("server_providers");
}

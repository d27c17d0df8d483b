// Registry credentials: the password is stored only as AES-256-GCM ciphertext
// (registry/crypto.ts, key RELAYCTL_MASTER_KEY), never in plaintext.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("registry_credentials", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("name", 128).notNullable();
    t.string("registry_url", 512).notNullable();
    t.string("registry_type", 32).notNullable();
    t.string("username", 255).notNullable();
    // base64(iv[12] | tag[16] | ciphertext)
    t.text("password_ciphertext").notNullable();
    t.bigInteger("created_at").notNullable();
    t.unique(["tenant_id", "name"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("registry_credentials");
}

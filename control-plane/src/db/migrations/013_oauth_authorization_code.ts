// OAuth clients that registered themselves (RFC 7591: MCP clients such as
// Claude Code or VS Code) and the authorization codes of the authorization code
// grant with PKCE (RFC 6749 §4.1, RFC 7636). A code is stored as its SHA-256
// only, lives a minute and is used once; the token family it will start is
// chosen when the code is issued, so a second use of the code can revoke the
// tokens the first use got (RFC 6749 §4.1.2).
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("oauth_clients", (t) => {
    t.string("id", 64).primary();
    t.string("name", 255).notNullable();
    // JSON array of exact redirect URIs (loopback http or https).
    t.text("redirect_uris").notNullable();
    t.string("registered_ip", 64).nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("oauth_authorization_codes", (t) => {
    uuid(t, "id").primary();
    t.string("code_hash", 64).notNullable().unique();
    t.string("client_id", 64).notNullable();
    uuid(t, "user_id").notNullable().references("users.id");
    uuid(t, "tenant_id").notNullable();
    t.text("redirect_uri").notNullable();
    // S256 only: BASE64URL(SHA256(code_verifier)), 43 characters.
    t.string("code_challenge", 64).notNullable();
    t.string("scope", 255).nullable();
    uuid(t, "family_id").notNullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("used_at").nullable();
    t.bigInteger("created_at").notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("oauth_authorization_codes");
  await knex.schema.dropTableIfExists("oauth_clients");
}

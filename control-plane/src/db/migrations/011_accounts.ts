// People and their interactive credentials: users of a tenant with a role,
// single-use invites, database-backed web sessions (so sign-out and revocation
// are immediate), OAuth device authorizations (RFC 8628) and OAuth tokens
// (access rco_ / refresh rcr_, in rotation families). Every secret is stored as
// its SHA-256 only; passwords as scrypt hashes.
import type { Knex } from "knex";

const uuid = (t: Knex.CreateTableBuilder, name: string) => t.string(name, 36);

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("users", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    // Stored lower case; sign-in is by e-mail alone, so it is unique across tenants.
    t.string("email", 254).notNullable().unique();
    t.string("role", 16).notNullable(); // owner | member
    t.string("password_hash", 255).notNullable();
    t.bigInteger("disabled_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("user_invites", (t) => {
    uuid(t, "id").primary();
    uuid(t, "tenant_id").notNullable().references("tenants.id");
    t.string("token_hash", 64).notNullable().unique();
    t.string("email", 254).notNullable();
    t.string("role", 16).notNullable();
    uuid(t, "invited_by").notNullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("used_at").nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("web_sessions", (t) => {
    uuid(t, "id").primary();
    uuid(t, "user_id").notNullable().references("users.id");
    uuid(t, "tenant_id").notNullable();
    t.string("token_hash", 64).notNullable().unique();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("revoked_at").nullable();
    t.string("ip", 64).nullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("oauth_device_authorizations", (t) => {
    uuid(t, "id").primary();
    t.string("device_code_hash", 64).notNullable().unique();
    // Normalised (no dash, upper case); unique so one typed code names one request.
    t.string("user_code", 16).notNullable().unique();
    t.string("client_id", 64).notNullable();
    t.string("scope", 255).nullable();
    t.string("status", 16).notNullable(); // pending | approved | denied | consumed
    uuid(t, "user_id").nullable();
    uuid(t, "tenant_id").nullable();
    t.integer("interval_seconds").notNullable();
    t.bigInteger("last_polled_at").nullable();
    t.bigInteger("expires_at").notNullable();
    t.bigInteger("created_at").notNullable();
  });

  await knex.schema.createTable("oauth_tokens", (t) => {
    uuid(t, "id").primary();
    // Every token issued from one approval (and its rotations) shares a family:
    // reuse of a rotated refresh token revokes the family at once.
    uuid(t, "family_id").notNullable().index();
    t.string("kind", 8).notNullable(); // access | refresh
    t.string("token_hash", 64).notNullable().unique();
    uuid(t, "user_id").notNullable().references("users.id");
    uuid(t, "tenant_id").notNullable();
    t.string("client_id", 64).notNullable();
    t.string("scope", 255).nullable();
    t.bigInteger("expires_at").notNullable();
    // A refresh token is used once: rotation marks it, a second use is reuse.
    t.bigInteger("used_at").nullable();
    t.bigInteger("revoked_at").nullable();
    t.bigInteger("created_at").notNullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists("oauth_tokens");
  await knex.schema.dropTableIfExists("oauth_device_authorizations");
  await knex.schema.dropTableIfExists("web_sessions");
  await knex.schema.dropTableIfExists("user_invites");
  await knex.schema.dropTableIfExists("users");
}

// Operator commands: create a tenant, an automation key (printed once) and a join
// token, revoke a key — so a new operator gets started without SQL. Each prints
// one JSON object on stdout.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { newAutomationKeyRow } from "../auth/automation-key.js";
import { createApiKey as insertApiKey, revokeApiKey as markApiKeyRevoked } from "../auth/api-key.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";

export class AdminError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export async function resolveTenant(db: Knex, idOrName: string): Promise<{ id: string; name: string }> {
  const q = db("tenants").first<{ id: string; name: string } | undefined>("id", "name");
  const row = await (UUID.test(idOrName)
    ? q.where({ id: idOrName.toLowerCase() })
    : q.where({ name: idOrName }));
  if (!row)
    throw new AdminError(`tenant '${idOrName}' not found (create it with: admin create-tenant --name ...)`);
  return row;
}

export async function createTenant(db: Knex, name: string) {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(name)) {
    throw new AdminError("tenant name: 1-128 characters of letters, digits, '.', '_' or '-'");
  }
  if (await db("tenants").where({ name }).first()) throw new AdminError(`tenant '${name}' already exists`);
  const id = randomUUID();
  await db.transaction(async (trx) => {
    await trx("tenants").insert({ id, name, created_at: Date.now() });
    await trx("audit_chain_heads").insert({ tenant_id: id, head: null, seq: 0 });
  });
  return { tenant_id: id, name };
}

export async function createAutomationKey(
  db: Knex,
  opts: { tenant: string; name: string; expiresAt?: string; rateLimit?: number },
): Promise<{ key_id: string; key: string; tenant_id: string; expires_at: string | null }> {
  const tenant = await resolveTenant(db, opts.tenant);
  let expiresAt: number | null = null;
  if (opts.expiresAt) {
    expiresAt = Date.parse(opts.expiresAt);
    if (Number.isNaN(expiresAt))
      throw new AdminError(`--expires-at: '${opts.expiresAt}' is not an ISO 8601 date`);
  }
  const rateLimit = opts.rateLimit ?? 100;
  if (!Number.isInteger(rateLimit) || rateLimit < 1 || rateLimit > 1000) {
    throw new AdminError("--rate-limit: requests per minute, a whole number from 1 to 1000");
  }
  const { key, row } = newAutomationKeyRow(tenant.id, opts.name, {
    rate_limit: rateLimit,
    expires_at: expiresAt,
  });
  const id = row.id;
  await db.transaction(async (trx) => {
    await trx("automation_keys").insert(row);
    await appendAuditEvent(trx, {
      tenantId: tenant.id,
      eventType: "automation_key.created",
      keyId: id,
      payload: { key_id: id, key_name: opts.name, actor: "admin-cli", expires_at: expiresAt },
    });
  });
  return {
    key_id: id,
    key,
    tenant_id: tenant.id,
    expires_at: expiresAt ? new Date(expiresAt).toISOString() : null,
  };
}

export async function revokeAutomationKey(db: Knex, keyId: string) {
  const row = await db("automation_keys")
    .where({ id: keyId })
    .first<{ tenant_id: string; name: string } | undefined>();
  if (!row) throw new AdminError(`automation key '${keyId}' not found`);
  const revokedAt = Date.now();
  await db.transaction(async (trx) => {
    await trx("automation_keys")
      .where({ id: keyId })
      .whereNull("revoked_at")
      .update({ revoked_at: revokedAt });
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: "automation_key.revoked",
      keyId,
      payload: { key_id: keyId, key_name: row.name, actor: "admin-cli" },
    });
  });
  return { key_id: keyId, revoked_at: new Date(revokedAt).toISOString() };
}

/** A regular API key (`X-API-Key: rck_...`) of the tenant; the secret is printed once. */
export async function createApiKey(db: Knex, opts: { tenant: string; name: string }) {
  const tenant = await resolveTenant(db, opts.tenant);
  if (opts.name.length < 1 || opts.name.length > 128) throw new AdminError("--name: 1-128 characters");
  return { ...(await insertApiKey(db, tenant.id, opts.name, "admin-cli")), tenant_id: tenant.id };
}

export async function revokeApiKey(db: Knex, keyId: string) {
  const out = UUID.test(keyId) ? await markApiKeyRevoked(db, keyId, "admin-cli") : null;
  if (!out) throw new AdminError(`API key '${keyId}' not found`);
  return out;
}

export async function createJoinToken(
  db: Knex,
  opts: { tenant: string; serverName: string; ttlMinutes: number },
) {
  const tenant = await resolveTenant(db, opts.tenant);
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(opts.serverName)) {
    throw new AdminError("--server-name: 1-128 characters of letters, digits, '.', '_' or '-'");
  }
  if (!Number.isInteger(opts.ttlMinutes) || opts.ttlMinutes < 1 || opts.ttlMinutes > 7 * 24 * 60) {
    throw new AdminError("--ttl-minutes: a whole number from 1 to 10080");
  }
  const token = mintToken("rjt_");
  const expiresAt = Date.now() + opts.ttlMinutes * 60_000;
  await db("join_tokens").insert({
    id: randomUUID(),
    tenant_id: tenant.id,
    token_hash: sha256Hex(token),
    server_name: opts.serverName,
    expires_at: expiresAt,
    created_at: Date.now(),
  });
  return { join_token: token, server_name: opts.serverName, expires_at: new Date(expiresAt).toISOString() };
}

// Operator commands: create a tenant, an automation key (printed once) and a join
// token, revoke a key — so a new operator gets started without SQL. Each prints
// one JSON object on stdout.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { z } from "zod";
import { isUuid, validationMessage } from "../http/validation.js";
import * as keyService from "../auth/automation-key-service.js";
import { OPERATOR_ACTOR, keyCreateSchema } from "../auth/automation-key-service.js";
import { SERVER_NAME_PATTERN, issueJoinToken } from "../auth/agent-credentials.js";
import { createApiKey as insertApiKey, revokeApiKey as markApiKeyRevoked } from "../auth/api-key.js";

export class AdminError extends Error {}

export async function resolveTenant(db: Knex, idOrName: string): Promise<{ id: string; name: string }> {
  const q = db("tenants").first<{ id: string; name: string } | undefined>("id", "name");
  const row = await (isUuid(idOrName)
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

/**
 * An automation key through the same service, schema and checks as
 * POST /api/automation-keys (an expiry in the past is refused by both).
 */
export async function createAutomationKey(
  db: Knex,
  opts: { tenant: string; name: string; expiresAt?: string; rateLimit?: number },
): Promise<{ key_id: string; key: string; tenant_id: string; expires_at: string | null }> {
  const tenant = await resolveTenant(db, opts.tenant);
  const input = parseOptions(keyCreateSchema, {
    name: opts.name,
    ...(opts.expiresAt !== undefined ? { expires_at: opts.expiresAt } : {}),
    ...(opts.rateLimit !== undefined ? { rate_limit: opts.rateLimit } : {}),
  });
  const created = await keyService.createAutomationKey(db, tenant.id, input, OPERATOR_ACTOR);
  return { key_id: created.id, key: created.key, tenant_id: tenant.id, expires_at: created.expires_at };
}

export async function revokeAutomationKey(db: Knex, keyId: string) {
  return keyService.revokeAutomationKey(db, null, keyId, OPERATOR_ACTOR);
}

const FLAGS: Record<string, string> = {
  expires_at: "--expires-at",
  rate_limit: "--rate-limit",
  name: "--name",
};

/** Checks CLI options with a route's schema; the message names the flag. */
function parseOptions<T>(schema: z.ZodType<T>, input: unknown): T {
  const r = schema.safeParse(input);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = String(issue.path[0] ?? "");
  throw new AdminError(`${FLAGS[field] ?? field}: ${validationMessage(issue)}`);
}

/** A regular API key (`X-API-Key: rck_...`) of the tenant; the secret is printed once. */
export async function createApiKey(db: Knex, opts: { tenant: string; name: string }) {
  const tenant = await resolveTenant(db, opts.tenant);
  if (opts.name.length < 1 || opts.name.length > 128) throw new AdminError("--name: 1-128 characters");
  const { key_id, key } = await insertApiKey(db, tenant.id, opts.name, OPERATOR_ACTOR);
  return { key_id, key, tenant_id: tenant.id };
}

export async function revokeApiKey(db: Knex, keyId: string) {
  const out = isUuid(keyId) ? await markApiKeyRevoked(db, keyId, OPERATOR_ACTOR) : null;
  if (!out) throw new AdminError(`API key '${keyId}' not found`);
  return out;
}

export async function createJoinToken(
  db: Knex,
  opts: { tenant: string; serverName: string; ttlMinutes: number },
) {
  const tenant = await resolveTenant(db, opts.tenant);
  if (!SERVER_NAME_PATTERN.test(opts.serverName)) {
    throw new AdminError("--server-name: 1-128 characters of letters, digits, '.', '_' or '-'");
  }
  if (!Number.isInteger(opts.ttlMinutes) || opts.ttlMinutes < 1 || opts.ttlMinutes > 7 * 24 * 60) {
    throw new AdminError("--ttl-minutes: a whole number from 1 to 10080");
  }
  const t = await issueJoinToken(db, { tenantId: tenant.id, ...opts });
  return { join_token: t.token, server_name: t.serverName, expires_at: t.expiresAt };
}

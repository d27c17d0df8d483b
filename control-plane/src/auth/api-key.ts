// Regular API keys (`X-API-Key: rck_...`): named, full access to their tenant, no
// IP restriction, no expiry; revocation is immediate. Stored as SHA-256 only.
import { randomUUID } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import type { AuditActor } from "./automation-key-service.js";
import { noteUse } from "./last-use.js";
import { type Principal, apiKeyPrincipal } from "./principal.js";
import { enforceRateLimit } from "./security-audit.js";

/** The general API key limits of the contract ("Limits"). */
export const API_KEY_WINDOWS = [
  { seconds: 60, limit: 100 },
  { seconds: 3600, limit: 1000 },
];

/**
 * Who (401 for an unknown key), how often (429 per minute and hour: a revoked
 * key's requests count too), then whether (401 revoked).
 */
export async function admitApiKey(db: Knex, req: FastifyRequest, reply: FastifyReply): Promise<Principal> {
  const header = req.headers["x-api-key"];
  const token = Array.isArray(header) ? header[0] : header;
  if (!token)
    throw new RcError("RC_ERR_UNAUTHENTICATED", "missing X-API-Key header: send 'X-API-Key: rck_...'");
  if (!token.startsWith("rck_"))
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid API key: keys start with rck_");
  const row = await db("api_keys")
    .where({ token_hash: sha256Hex(token.trim()) })
    .first<{ id: string; name: string; tenant_id: string; revoked_at: number | null } | undefined>(
      "id",
      "name",
      "tenant_id",
      "revoked_at",
    );
  if (!row) throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid API key");
  req.keyActor = { keyId: row.id, keyName: row.name, tenantId: row.tenant_id, keyType: "api_key" };
  await enforceRateLimit(db, req.log, reply, req.keyActor, req.ip, API_KEY_WINDOWS);
  if (row.revoked_at !== null) throw new RcError("RC_ERR_API_KEY_REVOKED");
  noteUse(db, req.log, "api_keys", row.id);
  return apiKeyPrincipal(row, API_KEY_WINDOWS[0].limit);
}

/** Creates a key of `tenantId`; the secret is returned here and never again. */
export async function createApiKey(db: Knex, tenantId: string, name: string, who: AuditActor) {
  const key = mintToken("rck_");
  const id = randomUUID();
  const createdAt = Date.now();
  await db.transaction(async (trx) => {
    await trx("api_keys").insert({
      id,
      tenant_id: tenantId,
      name,
      token_hash: sha256Hex(key),
      token_hint: key.slice(0, 8),
      created_at: createdAt,
    });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "api_key.created",
      keyId: id,
      payload: { key_id: id, key_name: name, ...who },
    });
  });
  return { key_id: id, key, created_at: new Date(createdAt).toISOString() };
}

/** The tenant's live keys, oldest first, without secrets. */
export async function listApiKeys(db: Knex, tenantId: string) {
  const rows = await db("api_keys")
    .where({ tenant_id: tenantId })
    .whereNull("revoked_at")
    .orderBy("created_at", "asc")
    .select<{ id: string; name: string; created_at: number; last_used_at: number | null }[]>(
      "id",
      "name",
      "created_at",
      "last_used_at",
    );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    created_at: new Date(Number(r.created_at)).toISOString(),
    last_used_at: r.last_used_at === null ? null : new Date(Number(r.last_used_at)).toISOString(),
  }));
}

/**
 * Revokes a key; returns null when there is no such key. Revoking twice keeps
 * the first time. With `tenantId` (the API), only a live key of that tenant:
 * another tenant's or a revoked key is null.
 */
export async function revokeApiKey(db: Knex, keyId: string, who: AuditActor, tenantId?: string) {
  const q = db("api_keys").where({ id: keyId.toLowerCase() });
  if (tenantId !== undefined) q.where({ tenant_id: tenantId }).whereNull("revoked_at");
  const row = await q.first<{ id: string; tenant_id: string; name: string } | undefined>(
    "id",
    "tenant_id",
    "name",
  );
  if (!row) return null;
  const revokedAt = Date.now();
  await db.transaction(async (trx) => {
    await trx("api_keys").where({ id: row.id }).whereNull("revoked_at").update({ revoked_at: revokedAt });
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: "api_key.revoked",
      keyId: row.id,
      payload: { key_id: row.id, key_name: row.name, ...who },
    });
  });
  return { key_id: row.id, revoked_at: new Date(revokedAt).toISOString() };
}

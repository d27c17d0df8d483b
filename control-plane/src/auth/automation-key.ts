// Automation-key authentication (`Authorization: Bearer rca_...`) for the
// Automation API. Keys are looked up by the SHA-256 of the whole token; revoked
// and expired keys are refused with a detail that says which. The key's scope
// (servers, operations, IP allowlist, rate limit) comes with the principal.
import { hash, randomUUID } from "node:crypto";
import type { FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import type { OperationScope } from "../operations/types.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { type Principal, keyPrincipal } from "./principal.js";
import type { KeyActor } from "./security-audit.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The presented key once it is found in the database, even when it is refused. */
    keyActor: KeyActor | null;
  }
}

export interface KeyRow {
  id: string;
  name: string;
  tenant_id: string;
  servers: string;
  operations: string;
  allowed_credential_ids: string;
  ip_allowlist: string;
  rate_limit: number;
  expires_at: number | null;
  revoked_at: number | null;
}

export function bearerToken(req: FastifyRequest): string {
  const header = req.headers.authorization;
  if (!header)
    throw new RcError("RC_ERR_UNAUTHENTICATED", "missing Authorization header: send 'Bearer rca_...'");
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw new RcError("RC_ERR_UNAUTHENTICATED", "Authorization header must be 'Bearer <token>'");
  return m[1];
}

/** The columns admission reads of a key. */
export const KEY_ROW_COLUMNS = [
  "id",
  "name",
  "tenant_id",
  "servers",
  "operations",
  "allowed_credential_ids",
  "ip_allowlist",
  "rate_limit",
  "expires_at",
  "revoked_at",
];

/** The SHA-256 of the presented key: 401 when the header is missing or malformed, or the key retired (rk_t_). */
export function presentedKeyHash(req: FastifyRequest): string {
  const token = bearerToken(req);
  if (token.startsWith("rk_t_")) throw new RcError("RC_ERR_KEY_RETIRED");
  if (!token.startsWith("rca_")) {
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key: keys start with rca_");
  }
  // What sha256Hex gives, in one call: every request hashes its key here, and a Hash object per
  // call cost ~1.9 against ~0.8 us for the one-shot (Node 24, this machine).
  return hash("sha256", token, "hex");
}

/** A found key is `req.keyActor` (even if it is then refused), so its refusals count and are audited under its tenant. */
export function actorOfKey(row: KeyRow): KeyActor {
  return { keyId: row.id, keyName: row.name, tenantId: row.tenant_id, keyType: "automation_key" };
}

/**
 * Finds the presented key: 401 when the header is missing or malformed, the key
 * is retired (rk_t_) or unknown. A found key becomes `req.keyActor`.
 */
export async function findAutomationKey(db: Knex, req: FastifyRequest): Promise<KeyRow> {
  const row = await db("automation_keys")
    .where({ token_hash: presentedKeyHash(req) })
    .first<KeyRow | undefined>(KEY_ROW_COLUMNS);
  if (!row) throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key");
  req.keyActor = actorOfKey(row);
  return row;
}

/** The principal of a found key: 401 when it is revoked or expired. */
export function principalOf(row: KeyRow): Principal {
  if (row.revoked_at !== null) throw new RcError("RC_ERR_KEY_REVOKED");
  if (row.expires_at !== null && Number(row.expires_at) <= Date.now())
    throw new RcError("RC_ERR_KEY_EXPIRED");
  return keyPrincipal("automation_key", {
    id: row.id,
    name: row.name,
    tenantId: row.tenant_id,
    servers: row.servers,
    operations: row.operations,
    allowedCredentialIds: row.allowed_credential_ids,
    ipAllowlist: row.ip_allowlist,
    rateLimit: row.rate_limit,
  });
}

/** 403 unless the key's operation scope allows `operation` (an empty scope allows all). */
export function requireOperation(principal: Principal, operation: OperationScope): void {
  if (principal.operations.length > 0 && !principal.operations.includes(operation)) {
    throw new RcError("RC_ERR_FORBIDDEN", `operation '${operation}' is outside this key's operation scope`);
  }
}

/**
 * A new automation key: its one-time secret and the row to insert (only the
 * hash is stored). Scope columns default to "everything"; pass stored (JSON)
 * forms in `fields` to narrow them.
 */
export function newAutomationKeyRow(tenantId: string, name: string, fields: Record<string, unknown> = {}) {
  const key = mintToken("rca_");
  const row = {
    id: randomUUID(),
    tenant_id: tenantId,
    name,
    token_hash: sha256Hex(key),
    token_hint: key.slice(0, 8),
    servers: "[]",
    operations: "[]",
    allowed_credential_ids: "[]",
    ip_allowlist: "[]",
    rate_limit: 100,
    expires_at: null as number | null,
    ...fields,
    created_at: Date.now(),
  };
  return { key, row };
}

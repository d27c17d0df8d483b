// Automation-key authentication (`Authorization: Bearer rca_...`) for the
// Automation API. Keys are looked up by the SHA-256 of the whole token; revoked
// and expired keys are refused with a detail that says which.
import type { FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { RcError } from "../errors.js";
import { sha256Hex } from "../lib/secrets.js";

export interface AutomationPrincipal {
  keyId: string;
  keyName: string;
  tenantId: string;
  servers: string[];
  operations: string[];
}

declare module "fastify" {
  interface FastifyRequest {
    principal: AutomationPrincipal;
  }
}

interface KeyRow {
  id: string;
  name: string;
  tenant_id: string;
  servers: string;
  operations: string;
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

export async function authenticateAutomationKey(db: Knex, req: FastifyRequest): Promise<AutomationPrincipal> {
  const token = bearerToken(req);
  if (token.startsWith("rk_t_")) throw new RcError("RC_ERR_KEY_RETIRED");
  if (!token.startsWith("rca_")) {
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key: keys start with rca_");
  }
  const row = await db("automation_keys")
    .where({ token_hash: sha256Hex(token) })
    .first<KeyRow | undefined>(
      "id",
      "name",
      "tenant_id",
      "servers",
      "operations",
      "expires_at",
      "revoked_at",
    );
  if (!row) throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid automation key");
  if (row.revoked_at !== null) throw new RcError("RC_ERR_KEY_REVOKED");
  if (row.expires_at !== null && Number(row.expires_at) <= Date.now())
    throw new RcError("RC_ERR_KEY_EXPIRED");
  return {
    keyId: row.id,
    keyName: row.name,
    tenantId: row.tenant_id,
    servers: JSON.parse(row.servers),
    operations: JSON.parse(row.operations),
  };
}

// The automation key behind an external-deploy session, checked again on every
// call made with the session's rds_ token: a session never outlives its key's
// rules. Revoked or expired → 401 with the key's reason; a caller IP outside the
// key's allowlist or a key that lost `external_deploy` → 403. The key's server
// scope is applied per application by the sync (out-of-scope entries become
// `errors` entries), since the other entries of the request may still go.
// The checks are the auth module's own (ipAllowed, requireOperation): one rule,
// whichever credential carries it.
import { requireOperation } from "../auth/automation-key.js";
import { ipAllowed } from "../auth/ip-allowlist.js";
import { type Principal, keyPrincipal } from "../auth/principal.js";
import { RcError } from "../errors.js";

/** The opening key's columns, read with the session (JSON columns as stored). */
export interface SessionKey {
  key_name: string;
  key_rate_limit: number;
  key_revoked_at: number | null;
  key_expires_at: number | null;
  key_servers: string;
  key_operations: string;
  key_ip_allowlist: string;
}

export const SESSION_KEY_COLUMNS = [
  "k.name as key_name",
  "k.rate_limit as key_rate_limit",
  "k.revoked_at as key_revoked_at",
  "k.expires_at as key_expires_at",
  "k.servers as key_servers",
  "k.operations as key_operations",
  "k.ip_allowlist as key_ip_allowlist",
];

/** The key as the auth module's principal, from the session's joined row. */
export function principalOf(s: SessionKey & { key_id: string; tenant_id: string }): Principal {
  return keyPrincipal("session_token", {
    id: s.key_id,
    name: s.key_name,
    tenantId: s.tenant_id,
    servers: s.key_servers,
    operations: s.key_operations,
    allowedCredentialIds: "[]",
    ipAllowlist: s.key_ip_allowlist,
    rateLimit: s.key_rate_limit,
  });
}

/**
 * Throws unless the opening key still allows this call from `ip`; returns the
 * key's server scope (empty = all servers) for the per-application check.
 */
export function admitSessionKey(s: SessionKey & { key_id: string; tenant_id: string }, ip: string): string[] {
  if (s.key_revoked_at !== null) {
    throw new RcError("RC_ERR_KEY_REVOKED", "the automation key that opened this session has been revoked");
  }
  if (s.key_expires_at !== null && Number(s.key_expires_at) <= Date.now()) {
    throw new RcError("RC_ERR_KEY_EXPIRED", "the automation key that opened this session has expired");
  }
  const key = principalOf(s);
  if (!ipAllowed(key.ipAllowlist, ip)) {
    throw new RcError(
      "RC_ERR_IP_NOT_ALLOWED",
      `caller IP ${ip} is not in the IP allowlist of the automation key that opened this session`,
    );
  }
  requireOperation(key, "external_deploy");
  return key.servers;
}

/** True when a server is within a key's server scope (an empty scope is every server). */
export function serverInScope(servers: string[], serverId: string): boolean {
  return servers.length === 0 || servers.includes(serverId);
}

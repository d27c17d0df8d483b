// Who is calling: one Principal for every credential (an automation key, an API
// key, a person with an access token or a signed-in browser, an external-deploy
// session token), built here and nowhere else, and set on the request as
// `req.principal` by the route's admission (api/register-routes.ts). Every
// route, scope check, rate limit and audit line reads this one shape.
import type { Role } from "../accounts/users.js";
import { userActor } from "../accounts/users.js";

/** The credential a principal was admitted with. */
export type PrincipalKind = "automation_key" | "api_key" | "access_token" | "web_session" | "session_token";

export interface UserRef {
  id: string;
  email: string;
  role: Role;
  /** The owner's `exec` grant (auth/roles.ts). */
  can_exec: boolean;
}

export interface Principal {
  kind: PrincipalKind;
  /** The key's id; for a person, the user's id. */
  keyId: string;
  /** The key's name; for a person, their email. */
  keyName: string;
  tenantId: string;
  /** The key's server scope: ids, empty for every server of the tenant. */
  servers: string[];
  /** The key's operation scope: names, empty for every operation. */
  operations: string[];
  /** Registry credentials the key may use, empty for all. */
  allowedCredentialIds: string[];
  ipAllowlist: string[];
  /** Requests a minute. */
  rateLimit: number;
  /** A person (an access token or a web session): the actor of what they do. */
  user?: UserRef;
  /**
   * An OAuth access token's scopes (auth/roles.ts): what the token may do within its
   * person's role. Unset for every other credential (a web session has the whole role).
   */
  scopes?: string[];
  /** A web session's id and CSRF token (the dashboard reads the token from GET /api/me). */
  session?: { id: string; csrf: string };
}

declare module "fastify" {
  interface FastifyRequest {
    /** The caller, once the route's admission ran (api/register-routes.ts). */
    principal: Principal;
  }
}

/** Full access to the tenant: what an API key and a person have (a person's role limits changes). */
const EVERYTHING = { servers: [], operations: [], allowedCredentialIds: [], ipAllowlist: [] };

/** A person's principal, whichever credential (access token or web session) they came with. */
export function personPrincipal(
  kind: "access_token" | "web_session",
  user: UserRef,
  tenantId: string,
  rateLimit: number,
  session?: { id: string; csrf: string },
  scopes?: string[],
): Principal {
  return {
    kind,
    keyId: user.id,
    keyName: user.email,
    tenantId,
    ...EVERYTHING,
    rateLimit,
    user,
    ...(session ? { session } : {}),
    ...(scopes ? { scopes } : {}),
  };
}

/** An API key's principal: the tenant's full access. */
export function apiKeyPrincipal(
  row: { id: string; name: string; tenant_id: string },
  rateLimit: number,
): Principal {
  return {
    kind: "api_key",
    keyId: row.id,
    keyName: row.name,
    tenantId: row.tenant_id,
    ...EVERYTHING,
    rateLimit,
  };
}

/** An automation key's principal (also a session token's, which acts for the key that opened it). */
export function keyPrincipal(
  kind: "automation_key" | "session_token",
  key: {
    id: string;
    name: string;
    tenantId: string;
    servers: string;
    operations: string;
    allowedCredentialIds: string;
    ipAllowlist: string;
    rateLimit: number;
  },
): Principal {
  return {
    kind,
    keyId: key.id,
    keyName: key.name,
    tenantId: key.tenantId,
    servers: JSON.parse(key.servers),
    operations: JSON.parse(key.operations),
    allowedCredentialIds: JSON.parse(key.allowedCredentialIds),
    ipAllowlist: JSON.parse(key.ipAllowlist),
    rateLimit: Number(key.rateLimit),
  };
}

/**
 * The actor fields of an audit event the caller causes: the person when there
 * is one, else the key (an API key's changes are filed as `api_key`, an
 * automation key's and its sessions' as `automation_key`).
 */
export function auditActor(p: Principal, ip: string) {
  if (p.user) return userActor(p.user, ip);
  const keyType = p.kind === "api_key" ? "api_key" : "automation_key";
  return { actor: { key_id: p.keyId, key_name: p.keyName, key_type: keyType }, ip };
}

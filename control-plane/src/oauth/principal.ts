// An OAuth access token (rco_) as the same principals keys give: the Automation
// API's (as `Authorization: Bearer rco_...`, like an rca_ key with every server
// and operation and the default limit) and the management API's (as
// `Authorization: Bearer rco_...` or `X-API-Key: rco_...`, like an rck_ key), so
// every route, scope check, rate limit and audit line that serves a key serves
// a person too, with the person as the actor. The role narrows what a member
// may change (OWNER_ONLY below); an API key acts as an owner.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import type { Role } from "../accounts/users.js";
import type { ApiKeyPrincipal } from "../auth/api-key.js";
import { API_KEY_WINDOWS } from "../auth/api-key.js";
import type { AutomationPrincipal } from "../auth/automation-key.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { findToken } from "./tokens.js";

export interface UserRef {
  id: string;
  email: string;
  role: Role;
}

declare module "../auth/api-key.js" {
  interface ApiKeyPrincipal {
    /** Set when the caller is a person with an OAuth access token. */
    user?: UserRef;
  }
}
declare module "../auth/automation-key.js" {
  interface AutomationPrincipal {
    /** Set when the caller is a person with an OAuth access token. */
    user?: UserRef;
  }
}

/** A person's Automation API limit: the default of an automation key. */
export const USER_AUTOMATION_WINDOWS = [{ seconds: 60, limit: 100 }];

/** The access token a request presents, if it presents one (else a key's admission runs). */
export function accessTokenOf(req: FastifyRequest, header: "authorization" | "either"): string | undefined {
  const m = /^Bearer\s+(rco_\S+)\s*$/i.exec(String(req.headers.authorization ?? ""));
  if (m) return m[1];
  if (header === "either") {
    const k = req.headers["x-api-key"];
    const v = (Array.isArray(k) ? k[0] : k)?.trim();
    if (v?.startsWith("rco_")) return v;
  }
  return undefined;
}

/** Who (401 unknown), how often (429), then whether (401 revoked or expired, user disabled). */
async function admit(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
  windows: { seconds: number; limit: number }[],
): Promise<{ user: UserRef; tenantId: string }> {
  const row = await findToken(db, token);
  if (!row || row.kind !== "access")
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid OAuth access token");
  const u = await db("users")
    .where({ id: row.user_id })
    .first<{ id: string; email: string; role: Role; disabled_at: number | null }>(
      "id",
      "email",
      "role",
      "disabled_at",
    );
  const user = { id: u.id, email: u.email, role: u.role };
  req.keyActor = { keyId: u.id, keyName: u.email, tenantId: row.tenant_id, keyType: "oauth_token", user };
  await enforceRateLimit(db, req.log, reply, req.keyActor, req.ip, windows);
  if (row.revoked_at !== null || u.disabled_at !== null) throw new RcError("RC_ERR_ACCESS_TOKEN_REVOKED");
  if (Number(row.expires_at) <= Date.now()) throw new RcError("RC_ERR_ACCESS_TOKEN_EXPIRED");
  return { user, tenantId: row.tenant_id };
}

export async function admitAccessTokenForAutomation(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
): Promise<AutomationPrincipal> {
  const { user, tenantId } = await admit(db, req, reply, token, USER_AUTOMATION_WINDOWS);
  return {
    keyId: user.id,
    keyName: user.email,
    tenantId,
    servers: [],
    operations: [],
    allowedCredentialIds: [],
    ipAllowlist: [],
    rateLimit: USER_AUTOMATION_WINDOWS[0].limit,
    user,
  };
}

/** Changes a member may not make: who holds credentials, and the people themselves. */
const OWNER_ONLY: { methods: string[]; url: RegExp }[] = [
  { methods: ["POST", "PATCH", "DELETE"], url: /^\/api\/automation-keys(\/|$)/ },
  { methods: ["POST", "DELETE"], url: /^\/api\/registry-credentials(\/|$)/ },
  { methods: ["PUT", "DELETE"], url: /^\/api\/servers\/[^/]+\/provider$/ },
  { methods: ["POST", "PATCH", "DELETE"], url: /^\/api\/users(\/|$)/ },
  // An install link binds a GitHub App installation (repository access) to the tenant.
  { methods: ["POST"], url: /^\/api\/github\/install-link$/ },
  // A join token makes a server of the tenant; an API key has the tenant's full access.
  { methods: ["POST"], url: /^\/api\/servers\/join-tokens$/ },
  { methods: ["POST", "DELETE"], url: /^\/api\/api-keys(\/|$)/ },
];

export function requireOwnerFor(req: FastifyRequest, role: Role): void {
  if (role === "owner") return;
  const url = req.routeOptions.url ?? req.url.split("?")[0];
  if (OWNER_ONLY.some((r) => r.methods.includes(req.method) && r.url.test(url)))
    throw new RcError(
      "RC_ERR_ROLE_FORBIDDEN",
      `${req.method} ${url} needs the owner role; you are a ${role}`,
    );
}

export async function admitAccessTokenForApi(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
): Promise<ApiKeyPrincipal> {
  const { user, tenantId } = await admit(db, req, reply, token, API_KEY_WINDOWS);
  requireOwnerFor(req, user.role);
  return { keyId: user.id, keyName: user.email, tenantId, user };
}

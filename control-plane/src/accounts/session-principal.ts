// The web session cookie (sessions.ts) as a credential of the JSON API, for the
// dashboard's pages: the signed-in person becomes the same principal an OAuth
// access token gives (oauth/principal.ts), so role, audit and tenant scoping
// are the same code. Only when the request carries no credential header: an
// explicit `Authorization` or `X-API-Key` always wins over the cookie. A
// cookie request that changes something (not GET/HEAD/OPTIONS) must carry the
// session's CSRF token in `X-CSRF-Token`, else 403 before anything runs.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import type { ApiKeyPrincipal } from "../auth/api-key.js";
import type { AutomationPrincipal } from "../auth/automation-key.js";
import type { KeyActor } from "../auth/security-audit.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { requireOwnerFor, USER_AUTOMATION_WINDOWS } from "../oauth/principal.js";
import { SESSION_COOKIE, currentSession, parseCookies, sameSecret } from "./sessions.js";

declare module "../auth/api-key.js" {
  interface ApiKeyPrincipal {
    /** Set when the caller is a person signed in on the web (the session cookie). */
    session?: { id: string; csrf: string };
  }
}

declare module "fastify" {
  interface FastifyContextConfig {
    /** An Automation API read the dashboard makes with its session cookie (GET only). */
    acceptsSession?: boolean;
  }
}

/**
 * A session's requests are counted per session (not per person: the person's
 * CLI token has its own limit). The pages poll (servers every ~2 s), so the
 * limit is a person's browsing, well above polling, not an API key's.
 */
export const WEB_SESSION_WINDOWS = [{ seconds: 60, limit: 600 }];

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** True when the request presents the session cookie and no credential header. */
export function sessionOnly(req: FastifyRequest): boolean {
  if (req.headers.authorization !== undefined || req.headers["x-api-key"] !== undefined) return false;
  return parseCookies(req.headers.cookie)[SESSION_COOKIE] !== undefined;
}

/** Who (401: no live session), how often (429), then the CSRF token of a state change (403). */
async function admitSession(db: Knex, req: FastifyRequest, reply: FastifyReply) {
  const session = await currentSession(db, req);
  if (!session)
    throw new RcError("RC_ERR_UNAUTHENTICATED", "not signed in: the session has ended, sign in again");
  const { user } = session;
  const ref = { id: user.id, email: user.email, role: user.role };
  const actor: KeyActor = {
    keyId: session.id,
    keyName: user.email,
    tenantId: user.tenant_id,
    keyType: "web_session",
    user: ref,
  };
  req.keyActor = actor;
  await enforceRateLimit(db, req.log, reply, actor, req.ip, WEB_SESSION_WINDOWS);
  if (!SAFE_METHODS.has(req.method)) {
    const header = req.headers["x-csrf-token"];
    if (!sameSecret(Array.isArray(header) ? header[0] : header, session.csrf))
      throw new RcError(
        "RC_ERR_CSRF",
        "missing or invalid X-CSRF-Token header: send the csrf_token of GET /api/me",
      );
  }
  return { user: ref, tenantId: user.tenant_id, session: { id: session.id, csrf: session.csrf } };
}

export async function admitSessionForApi(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<ApiKeyPrincipal> {
  const { user, tenantId, session } = await admitSession(db, req, reply);
  requireOwnerFor(req, user.role);
  return { keyId: user.id, keyName: user.email, tenantId, user, session };
}

/** The Automation API's reads (routes with `config.acceptsSession`), as a person's access token reads them. */
export async function admitSessionForAutomation(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<AutomationPrincipal> {
  const { user, tenantId } = await admitSession(db, req, reply);
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

/** Whether an Automation API request is a session read its route accepts. */
export function sessionRead(req: FastifyRequest): boolean {
  return req.method === "GET" && req.routeOptions.config?.acceptsSession === true && sessionOnly(req);
}

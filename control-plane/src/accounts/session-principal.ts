// The web session cookie (sessions.ts) as a credential of the JSON API, for the
// dashboard's pages: the signed-in person becomes the same principal an OAuth
// access token gives (oauth/principal.ts), so role, audit and tenant scoping
// are the same code. Only when the request carries no credential header: an
// explicit `Authorization` or `X-API-Key` always wins over the cookie. A
// cookie request that changes something (not GET/HEAD/OPTIONS) must carry the
// session's CSRF token in `X-CSRF-Token`, else 403 before anything runs.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { type Principal, personPrincipal } from "../auth/principal.js";
import { noteUse } from "../auth/last-use.js";
import type { KeyActor } from "../auth/security-audit.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { SESSION_COOKIE, currentSession, parseCookies, sameSecret } from "./sessions.js";

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
export async function admitWebSession(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<Principal> {
  const session = await currentSession(db, req);
  if (!session)
    throw new RcError("RC_ERR_UNAUTHENTICATED", "not signed in: the session has ended, sign in again");
  const { user } = session;
  const ref = { id: user.id, email: user.email, role: user.role, can_exec: Boolean(user.can_exec) };
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
  noteUse(db, req.log, "web_sessions", session.id);
  return personPrincipal("web_session", ref, user.tenant_id, WEB_SESSION_WINDOWS[0].limit, {
    id: session.id,
    csrf: session.csrf,
  });
}

// An OAuth access token (rco_) admitted as a person's Principal (auth/principal.ts):
// on the Automation API as `Authorization: Bearer rco_...` (like an rca_ key
// with every server and operation and the default limit), on the management
// API also as `X-API-Key: rco_...` (like an rck_ key). So every route, scope
// check, rate limit and audit line that serves a key serves a person too, with
// the person as the actor. Which routes a person may call is the routes' own
// declaration (`access.role`, `access.grant`), checked by api/register-routes.ts.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import type { Role } from "../accounts/users.js";
import { type Principal, type UserRef, personPrincipal } from "../auth/principal.js";
import { type RateWindow, enforceRateLimit } from "../auth/security-audit.js";
import { RcError } from "../errors.js";
import { tokenScopes } from "./scopes.js";
import { findToken } from "./tokens.js";

export type { UserRef } from "../auth/principal.js";

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

/** Who (401 unknown), how often (429 in `windows`), then whether (401 revoked or expired, user disabled). */
export async function admitAccessToken(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
  windows: RateWindow[],
): Promise<Principal> {
  const row = await findToken(db, token);
  if (!row || row.kind !== "access")
    throw new RcError("RC_ERR_UNAUTHENTICATED", "invalid OAuth access token");
  const u = await db("users")
    .where({ id: row.user_id })
    .first<{ id: string; email: string; role: Role; can_exec: boolean | number; disabled_at: number | null }>(
      "id",
      "email",
      "role",
      "can_exec",
      "disabled_at",
    );
  const user: UserRef = { id: u.id, email: u.email, role: u.role, can_exec: Boolean(u.can_exec) };
  req.keyActor = { keyId: u.id, keyName: u.email, tenantId: row.tenant_id, keyType: "oauth_token", user };
  await enforceRateLimit(db, req.log, reply, req.keyActor, req.ip, windows);
  if (row.revoked_at !== null || u.disabled_at !== null) throw new RcError("RC_ERR_ACCESS_TOKEN_REVOKED");
  if (Number(row.expires_at) <= Date.now()) throw new RcError("RC_ERR_ACCESS_TOKEN_EXPIRED");
  return personPrincipal(
    "access_token",
    user,
    row.tenant_id,
    windows[0].limit,
    undefined,
    tokenScopes(row.scope),
  );
}

// An external-deploy session's token (rds_) as a credential: the session (401),
// its opening key's rules again (session-key.ts: 401/403), then that key's rate
// limit (429). The caller is the key that opened the session (a Principal of
// kind `session_token`); the session row and the key's server scope ride on
// `req.deploySession` for the handlers.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import type { Principal } from "../auth/principal.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { admitSessionKey, principalOf } from "./session-key.js";
import { type SessionRow, sessionOfToken } from "./sessions.js";

declare module "fastify" {
  interface FastifyRequest {
    /** The session of the request's rds_ token and its key's server scope. */
    deploySession: { session: SessionRow; servers: string[] };
  }
}

export async function admitSessionToken(
  db: Knex,
  req: FastifyRequest,
  reply: FastifyReply,
  token: string,
  /** "allowed" where acting on an ended session is fine (ending it again is idempotent). */
  ended: "refused" | "allowed",
): Promise<Principal> {
  const session = await sessionOfToken(db, token, ended);
  const actor = { keyId: session.key_id, keyName: session.key_name, tenantId: session.tenant_id };
  req.keyActor = { ...actor, keyType: "automation_key" };
  const servers = admitSessionKey(session, req.ip);
  await enforceRateLimit(db, req.log, reply, req.keyActor, req.ip, [
    { seconds: 60, limit: Number(session.key_rate_limit) },
  ]);
  req.deploySession = { session, servers };
  return principalOf(session);
}

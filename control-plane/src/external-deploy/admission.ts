// An external-deploy session's token (rds_) as a credential: the session (401),
// its opening key's rules again (session-key.ts: 401/403), then that key's rate
// limit (429). The caller is the key that opened the session (a Principal of
// kind `session_token`); the session row and the key's server scope ride on
// `req.deploySession` for the handlers.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { noteChainHead } from "../audit/group-commit.js";
import type { Principal } from "../auth/principal.js";
import { enforceRateLimit } from "../auth/security-audit.js";
import { admitSessionKey, principalOf } from "./session-key.js";
import { type SessionRow, sessionOfToken } from "./sessions.js";
import { type SessionApp, sessionApplications } from "./sync.js";

declare module "fastify" {
  interface FastifyRequest {
    /**
     * The session of the request's rds_ token and its key's server scope; on a sync, its
     * applications' read, started beside the rate limit's count.
     */
    deploySession: { session: SessionRow; servers: string[]; applications?: Promise<SessionApp[]> };
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
  const { chain_head, chain_seq, ...session } = await sessionOfToken(db, token, ended);
  if (chain_seq !== null) noteChainHead(db, session.tenant_id, { head: chain_head, seq: Number(chain_seq) });
  const actor = { keyId: session.key_id, keyName: session.key_name, tenantId: session.tenant_id };
  req.keyActor = { ...actor, keyType: "automation_key" };
  const servers = admitSessionKey(session, req.ip);
  // A sync's first read needs only the session: it runs beside the rate limit's count (one round
  // trip less per sync). Only a read, and only for a token that passed: a refused call (429, a bad
  // body) answers nothing of it; its rejection is handled here and thrown where it is awaited.
  const applications = ended === "refused" ? sessionApplications(db, session) : undefined;
  applications?.catch(() => undefined);
  await enforceRateLimit(db, req.log, reply, req.keyActor, req.ip, [
    { seconds: 60, limit: Number(session.key_rate_limit) },
  ]);
  req.deploySession = { session, servers, ...(applications ? { applications } : {}) };
  return principalOf(session);
}

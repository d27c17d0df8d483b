// Agent credentials (rag_), the one owner of their life: issued at enrollment in
// exchange for a single-use, expiring join token (rjt_), revoked by the operator
// (`admin revoke-agent`). Only the SHA-256 is stored; the gateway looks the
// credential up by it on every connect, so a cleared hash is refused at once.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { labelsColumn } from "../fleets/labels.js";
import type { AuditActor } from "./automation-key-service.js";

interface JoinRow {
  id: string;
  tenant_id: string;
  server_name: string;
  expires_at: number;
  used_at: number | null;
}

/** A server's name (the enrolled server gets it): letters, digits, '.', '_', '-'; 1-128. */
export const SERVER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/**
 * A single-use join token (rjt_) that enrolls one agent as `serverName`; only its
 * hash is stored. Audited (`join_token.created`, never the token) when `who` is given.
 */
export async function issueJoinToken(
  db: Knex,
  opts: { tenantId: string; serverName: string; ttlMinutes: number },
  who?: AuditActor,
) {
  const token = mintToken("rjt_");
  const id = randomUUID();
  const now = Date.now();
  const expiresAt = now + opts.ttlMinutes * 60_000;
  await db.transaction(async (trx) => {
    await trx("join_tokens").insert({
      id,
      tenant_id: opts.tenantId,
      token_hash: sha256Hex(token),
      server_name: opts.serverName,
      expires_at: expiresAt,
      created_at: now,
    });
    if (who)
      await appendAuditEvent(trx, {
        tenantId: opts.tenantId,
        eventType: "join_token.created",
        payload: {
          join_token_id: id,
          server_name: opts.serverName,
          expires_at: new Date(expiresAt).toISOString(),
          ...who,
        },
      });
  });
  return { token, serverName: opts.serverName, expiresAt: new Date(expiresAt).toISOString() };
}

export interface EnrollInput {
  token: string;
  hostname?: string;
  agent_version?: string;
  /** Server labels given at enrollment; absent or empty keeps the server's. */
  labels?: Record<string, string>;
  ip: string;
}

/**
 * Trades a join token for a new credential. Enrolling again under a name that
 * exists rotates that server's credential. 401 for an invalid, used or expired token.
 */
export async function enrollAgent(db: Knex, input: EnrollInput) {
  const { token, hostname, agent_version } = input;
  if (!token.startsWith("rjt_")) throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
  const credential = mintToken("rag_");
  const server = await db.transaction(async (trx) => {
    const jt = await trx("join_tokens")
      .where({ token_hash: sha256Hex(token) })
      .first<JoinRow | undefined>();
    if (!jt || jt.used_at !== null || Number(jt.expires_at) <= Date.now()) {
      throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
    }
    // The used_at guard makes the token single use even under a race.
    const claimed = await trx("join_tokens")
      .where({ id: jt.id, used_at: null })
      .update({ used_at: Date.now() });
    if (claimed !== 1) throw new RcError("RC_ERR_JOIN_TOKEN_INVALID");
    const existing = await trx("servers")
      .where({ tenant_id: jt.tenant_id, name: jt.server_name })
      .first<{ id: string } | undefined>("id");
    const id = existing?.id ?? randomUUID();
    const fields = {
      agent_credential_hash: sha256Hex(credential),
      hostname: hostname ?? null,
      agent_version: agent_version ?? null,
      // Labels given at enrollment (fleets/labels.ts) replace the server's; none keeps them.
      ...(input.labels && Object.keys(input.labels).length > 0 ? { labels: labelsColumn(input.labels) } : {}),
    };
    // A removed server (servers/removal.ts) enrolled again is listed again, with its history.
    if (existing)
      await trx("servers")
        .where({ id })
        .update({ ...fields, removed_at: null });
    else
      await trx("servers").insert({
        id,
        tenant_id: jt.tenant_id,
        name: jt.server_name,
        created_at: Date.now(),
        ...fields,
      });
    await trx("join_tokens").where({ id: jt.id }).update({ server_id: id });
    await appendAuditEvent(trx, {
      tenantId: jt.tenant_id,
      eventType: "agent.enrolled",
      serverId: id,
      payload: {
        server_id: id,
        server_name: jt.server_name,
        hostname: hostname ?? null,
        ip: input.ip,
        ...(input.labels ? { labels: input.labels } : {}),
      },
    });
    return { id, name: jt.server_name };
  });
  return { server_id: server.id, server_name: server.name, agent_credential: credential };
}

/** Clears a server's credential hash: the gateway refuses the credential from its next connect. */
export async function revokeAgentCredential(
  db: Knex,
  server: { id: string; name: string; tenant_id: string },
  who: AuditActor,
) {
  const revokedAt = Date.now();
  await db.transaction(async (trx) => {
    await trx("servers").where({ id: server.id }).update({ agent_credential_hash: null });
    await appendAuditEvent(trx, {
      tenantId: server.tenant_id,
      eventType: "agent.credential_revoked",
      serverId: server.id,
      payload: { server_id: server.id, server_name: server.name, ...who },
    });
  });
  return { server_id: server.id, server_name: server.name, revoked_at: new Date(revokedAt).toISOString() };
}

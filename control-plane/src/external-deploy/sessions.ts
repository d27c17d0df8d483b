// External-deploy sessions: opened with an rca_ key holding `external_deploy`,
// they name the containers a pipeline started and carry the applications matched
// by `linked_container_name` (within the key's tenant and server scope). The
// `rds_` token is shown once and stored as SHA-256; a deleted or expired session
// stops working at once, and every call with the token is held to the opening
// key's rules again (session-key.ts).
import { randomUUID } from "node:crypto";
import type { FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { bearerToken } from "../auth/automation-key.js";
import { type Principal, auditActor } from "../auth/principal.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { iso } from "../lib/time.js";
import { SESSION_KEY_COLUMNS, type SessionKey, serverInScope } from "./session-key.js";
import { isUuid } from "../http/validation.js";

export interface SessionRow {
  id: string;
  tenant_id: string;
  key_id: string;
  application_ids: string;
  container_names: string;
  workflow_run_id: string | null;
  commit_sha: string | null;
  expires_at: number;
  deleted_at: number | null;
}

export interface SessionBody {
  container_names: string[];
  workflow_run_id?: string;
  commit_sha?: string;
}

interface MatchedRow {
  id: string;
  linked_container_name: string;
  container_port: number;
  fqdns: string;
}

async function matchApplications(db: Knex, principal: Principal, names: string[]) {
  const q = db("applications")
    .where({ tenant_id: principal.tenantId })
    .whereIn("linked_container_name", names)
    .orderBy(["linked_container_name", "created_at"]);
  if (principal.servers.length > 0) q.whereIn("server_id", principal.servers);
  return q.select<MatchedRow[]>("id", "linked_container_name", "container_port", "fqdns");
}

export async function openSession(
  db: Knex,
  principal: Principal,
  body: SessionBody,
  ttlSeconds: number,
  ip: string,
) {
  const names = [...new Set(body.container_names)];
  const matched = await matchApplications(db, principal, names);
  const found = new Set(matched.map((m) => m.linked_container_name));
  const unmatched = names.filter((n) => !found.has(n));
  if (matched.length === 0) {
    throw new RcError(
      "RC_ERR_NO_APPLICATION_MATCHED",
      `no container name matched an application's linked_container_name (asked: ${names.slice(0, 20).join(", ")})`,
    );
  }
  const token = mintToken("rds_");
  const now = Date.now();
  const row = {
    id: randomUUID(),
    tenant_id: principal.tenantId,
    key_id: principal.keyId,
    token_hash: sha256Hex(token),
    application_ids: JSON.stringify(matched.map((m) => m.id)),
    container_names: JSON.stringify(names),
    workflow_run_id: body.workflow_run_id ?? null,
    commit_sha: body.commit_sha ?? null,
    expires_at: now + ttlSeconds * 1000,
    deleted_at: null,
    created_at: now,
  };
  const applications = matched.map((m) => ({
    id: m.id,
    linked_container_name: m.linked_container_name,
    container_port: Number(m.container_port),
    bound_fqdns: JSON.parse(m.fqdns) as string[],
  }));
  await db.transaction(async (trx) => {
    await trx("external_deploy_sessions").insert(row);
    await appendAuditEvent(trx, {
      tenantId: principal.tenantId,
      eventType: "external_deploy.session_created",
      keyId: principal.keyId,
      runId: row.workflow_run_id,
      payload: {
        session_id: row.id,
        container_names: names,
        application_ids: applications.map((a) => a.id),
        unmatched,
        workflow_run_id: row.workflow_run_id,
        commit_sha: row.commit_sha,
        expires_at: iso(row.expires_at),
        ...auditActor(principal, ip),
      },
    });
  });
  return {
    session_id: row.id,
    session_token: token,
    expires_at: iso(row.expires_at),
    applications,
    unmatched,
  };
}

/**
 * The tenant's audit chain head, read with the session (no lock): the guess its
 * sync's claims and operation commit on in one round trip (claim-start.ts), as
 * an automation key's admission reads it for an exec.
 */
export interface ChainHeadColumns {
  chain_head: string | null;
  chain_seq: number | string | null;
}

const SESSION_COLUMNS = [
  "id",
  "tenant_id",
  "key_id",
  "application_ids",
  "container_names",
  "workflow_run_id",
  "commit_sha",
  "expires_at",
  "deleted_at",
];

/**
 * The session of an `rds_` bearer token with its opening key's columns; 401 when
 * unknown, and unless `ended` is "allowed" (a repeated DELETE), when deleted or
 * expired. The key itself is checked by admitSessionKey.
 */
export async function sessionOfToken(
  db: Knex,
  token: string,
  ended: "refused" | "allowed" = "refused",
): Promise<SessionRow & SessionKey & ChainHeadColumns> {
  if (!token.startsWith("rds_")) {
    throw new RcError("RC_ERR_SESSION_INVALID", "invalid session token: session tokens start with rds_");
  }
  const row = await db("external_deploy_sessions as d")
    .join("automation_keys as k", "k.id", "d.key_id")
    .leftJoin("audit_chain_heads as h", "h.tenant_id", "d.tenant_id")
    .where({ "d.token_hash": sha256Hex(token) })
    .first<(SessionRow & SessionKey & ChainHeadColumns) | undefined>(
      ...SESSION_COLUMNS.map((c) => `d.${c}`),
      ...SESSION_KEY_COLUMNS,
      "h.head as chain_head",
      "h.seq as chain_seq",
    );
  if (!row) throw new RcError("RC_ERR_SESSION_INVALID");
  if (ended === "allowed") return row;
  if (row.deleted_at !== null) throw new RcError("RC_ERR_SESSION_ENDED");
  if (Number(row.expires_at) <= Date.now()) throw new RcError("RC_ERR_SESSION_EXPIRED");
  return row;
}

export function sessionBearer(req: FastifyRequest): string | undefined {
  const token = bearerToken(req);
  return token.startsWith("rds_") ? token : undefined;
}

/**
 * 403 unless every application of the session is on a server within `servers`
 * (a key scoped to some servers must not end another team's deploy).
 */
async function requireSessionInScope(db: Knex, row: SessionRow, servers: string[]): Promise<void> {
  if (servers.length === 0) return;
  const ids = JSON.parse(row.application_ids) as string[];
  const apps = await db("applications as a")
    .join("servers as s", "s.id", "a.server_id")
    .where({ "a.tenant_id": row.tenant_id })
    .whereIn("a.id", ids)
    .select<{ server_id: string; server_name: string }[]>("a.server_id", "s.name as server_name");
  const outside = apps.find((a) => !serverInScope(servers, a.server_id));
  if (outside) {
    throw new RcError(
      "RC_ERR_FORBIDDEN",
      `external-deploy session '${row.id}' reaches server '${outside.server_name}', outside this key's server scope`,
    );
  }
}

/**
 * Ends a session (idempotent: deleting an ended session again is 204 too).
 * `tenantId` limits it to one tenant; another tenant's id is 404. `servers` is
 * the server scope of an rca_ key that asks (empty = all servers).
 */
export async function endSession(
  db: Knex,
  tenantId: string,
  sessionId: string,
  actor: Record<string, unknown>,
  servers: string[] = [],
): Promise<void> {
  const row = isUuid(sessionId)
    ? await db("external_deploy_sessions")
        .where({ id: sessionId.toLowerCase(), tenant_id: tenantId })
        .first<SessionRow | undefined>(SESSION_COLUMNS)
    : undefined;
  if (!row) throw new RcError("RC_ERR_SESSION_NOT_FOUND", `external-deploy session '${sessionId}' not found`);
  await requireSessionInScope(db, row, servers);
  if (row.deleted_at !== null) return;
  await db.transaction(async (trx) => {
    await trx("external_deploy_sessions")
      .where({ id: row.id })
      .whereNull("deleted_at")
      .update({ deleted_at: Date.now() });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "external_deploy.session_deleted",
      runId: row.workflow_run_id,
      payload: {
        session_id: row.id,
        workflow_run_id: row.workflow_run_id,
        commit_sha: row.commit_sha,
        ...actor,
      },
    });
  });
}

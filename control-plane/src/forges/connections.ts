// forge_connections: a tenant's GitLab, Gitea or Forgejo (issue 32). Created
// with the API token the owner gives (a project/repository access token) and
// a webhook secret relayctl makes, shown once. GitLab's secret comes back as
// X-Gitlab-Token and is compared, so only its SHA-256 is kept; Gitea/Forgejo
// sign the body with it (HMAC), so it is sealed like the token
// (registry/crypto.ts, the master key). Nothing secret is ever presented.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { isUuid } from "../http/validation.js";
import { open, seal } from "../registry/crypto.js";
import { isDuplicate } from "../github/sql.js";

export const FORGE_KINDS = ["gitlab", "gitea", "forgejo"] as const;
export type ForgeKind = (typeof FORGE_KINDS)[number];

export interface ConnectionRow {
  id: string;
  tenant_id: string;
  kind: ForgeKind;
  name: string;
  base_url: string;
  webhook_secret_sha256: string | null;
  webhook_secret_sealed: string | null;
  api_token_sealed: string;
  created_by: string | null;
  created_at: number;
}

/** The receiver a connection's webhooks go to: Forgejo speaks Gitea's dialect. */
export const receiverOf = (kind: ForgeKind) => (kind === "gitlab" ? "gitlab" : "gitea");

export const sha256Hex = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * The forge's address, normalised (no trailing slash); a warning when it is
 * plain http off loopback: its tokens and webhooks then cross the network in clear.
 */
export function checkBaseUrl(raw: string): { baseUrl: string; warning: string | null } {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new RcError(
      "RC_ERR_VALIDATION",
      "base_url: must be an absolute URL such as https://gitlab.example.com",
    );
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    throw new RcError("RC_ERR_VALIDATION", "base_url: must be https:// (or http:// on loopback)");
  if (u.username || u.password || u.search || u.hash)
    throw new RcError(
      "RC_ERR_VALIDATION",
      "base_url: no credentials, query or fragment: the forge's address only",
    );
  const baseUrl = `${u.origin}${u.pathname}`.replace(/\/+$/, "");
  const loopback = LOOPBACK.has(u.hostname) || u.hostname.startsWith("127.");
  const warning =
    u.protocol === "http:" && !loopback
      ? "base_url is plain http: the API token and the webhooks cross the network unencrypted; use https"
      : null;
  return { baseUrl, warning };
}

export function presentConnection(c: ConnectionRow, publicUrl: string | undefined) {
  return {
    id: c.id,
    kind: c.kind,
    name: c.name,
    base_url: c.base_url,
    webhook_url: `${publicUrl ?? ""}/webhooks/${receiverOf(c.kind)}/${c.id}`,
    created_by: c.created_by,
    created_at: new Date(Number(c.created_at)).toISOString(),
  };
}

export interface NewConnection {
  kind: ForgeKind;
  name: string;
  base_url: string;
  api_token: string;
}

export async function createConnection(
  db: Knex,
  masterKey: Buffer,
  tenantId: string,
  input: NewConnection,
  createdBy: string,
  auditFacts: Record<string, unknown>,
) {
  const { baseUrl, warning } = checkBaseUrl(input.base_url);
  const secret = randomBytes(32).toString("hex");
  const row: ConnectionRow = {
    id: randomUUID(),
    tenant_id: tenantId,
    kind: input.kind,
    name: input.name,
    base_url: baseUrl,
    webhook_secret_sha256: input.kind === "gitlab" ? sha256Hex(secret) : null,
    webhook_secret_sealed: input.kind === "gitlab" ? null : seal(masterKey, secret),
    api_token_sealed: seal(masterKey, input.api_token),
    created_by: createdBy,
    created_at: Date.now(),
  };
  try {
    await db.transaction(async (trx) => {
      await trx("forge_connections").insert(row);
      await appendAuditEvent(trx, {
        tenantId,
        eventType: "forge.connection.created",
        payload: { connection_id: row.id, kind: row.kind, name: row.name, base_url: baseUrl, ...auditFacts },
      });
    });
  } catch (err) {
    if (isDuplicate(err))
      throw new RcError("RC_ERR_FORGE_NAME_TAKEN", `a forge connection named '${input.name}' already exists`);
    throw err;
  }
  return { row, secret, warning };
}

/** The tenant's connection, or 404. */
export async function getConnection(db: Knex, tenantId: string, id: string): Promise<ConnectionRow> {
  const row = isUuid(id)
    ? await db("forge_connections")
        .where({ id: id.toLowerCase(), tenant_id: tenantId })
        .first<ConnectionRow>()
    : undefined;
  if (!row) throw new RcError("RC_ERR_FORGE_NOT_FOUND", `forge connection '${id}' not found`);
  return row;
}

/** A connection by the id in a webhook's URL (any tenant: the secret then proves it). */
export async function connectionById(db: Knex, id: string): Promise<ConnectionRow | undefined> {
  if (!isUuid(id)) return undefined;
  return db("forge_connections").where({ id: id.toLowerCase() }).first<ConnectionRow>();
}

/** The API token, opened for one use (a clone, a status post). */
export const apiToken = (masterKey: Buffer, c: ConnectionRow) => open(masterKey, c.api_token_sealed);

/** Refused (409) while applications are linked to it, naming them. */
export async function deleteConnection(
  db: Knex,
  tenantId: string,
  id: string,
  auditFacts: Record<string, unknown>,
): Promise<void> {
  const c = await getConnection(db, tenantId, id);
  const linked = await db("applications")
    .where({ tenant_id: tenantId, forge_connection_id: c.id })
    .orderBy("name")
    .pluck<string[]>("name");
  if (linked.length > 0)
    throw new RcError(
      "RC_ERR_FORGE_IN_USE",
      `forge connection '${c.name}' is linked to ${linked.map((n) => `'${n}'`).join(", ")}: unlink them first (DELETE /api/applications/{id}/forge-repository)`,
    );
  await db.transaction(async (trx) => {
    await trx("forge_commit_statuses").where({ connection_id: c.id }).delete();
    await trx("forge_deliveries").where({ connection_id: c.id }).delete();
    await trx("forge_connections").where({ id: c.id }).delete();
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "forge.connection.deleted",
      payload: { connection_id: c.id, kind: c.kind, name: c.name, ...auditFacts },
    });
  });
}

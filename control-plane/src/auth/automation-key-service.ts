// The one place automation keys are created, changed and revoked, for the API
// (/api/automation-keys) and the operator CLI (`admin create-automation-key`)
// alike: the same schema and checks (an expiry in the past is refused by both),
// the same stored row and the same audit event, with the actor in one shape:
// `{ actor: { key_id, key_name, key_type }, ip }` (key_type `api_key` or
// `operator_cli`). The `rca_` secret is returned by create only.
import type { Knex } from "knex";
import { z } from "zod";
import { OPERATIONS, type ScopeInput, compileScope } from "./key-scope.js";
import { dateTime, uuid as uuidSchema } from "../http/validation.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { iso } from "../lib/time.js";
import { newAutomationKeyRow } from "./automation-key.js";

/** Who did it, as audit payloads carry it. */
export interface AuditActor {
  actor: { key_id?: string; key_name?: string; key_type: "api_key" | "operator_cli" };
  ip?: string | null;
}

/** The operator CLI: it runs on the control plane's host with database access. */
export const OPERATOR_ACTOR: AuditActor = { actor: { key_type: "operator_cli" }, ip: null };

const fields = {
  name: z.string().min(1).max(128),
  servers: z.array(uuidSchema).max(1000),
  operations: z.array(z.enum(OPERATIONS)).max(OPERATIONS.length),
  allowed_credential_ids: z.array(uuidSchema).max(1000),
  ip_allowlist: z.array(z.string().min(1).max(64)).max(256),
  rate_limit: z.int().min(1).max(1000),
  expires_at: dateTime.nullable(),
};

export const keyCreateSchema = z.strictObject({
  ...fields,
  servers: fields.servers.optional(),
  operations: fields.operations.optional(),
  allowed_credential_ids: fields.allowed_credential_ids.optional(),
  ip_allowlist: fields.ip_allowlist.optional(),
  rate_limit: fields.rate_limit.optional(),
  expires_at: fields.expires_at.optional(),
});
export const keyPatchSchema = keyCreateSchema
  .partial()
  .refine((o) => Object.keys(o).length > 0, { error: "must name at least one field to change" });

export type KeyCreateInput = z.infer<typeof keyCreateSchema>;
export type KeyPatchInput = z.infer<typeof keyPatchSchema>;

export const KEY_COLUMNS = [
  "id",
  "name",
  "servers",
  "operations",
  "allowed_credential_ids",
  "ip_allowlist",
  "rate_limit",
  "expires_at",
  "created_at",
];

// biome-ignore lint/suspicious/noExplicitAny: a row as knex returns it
export function presentKey(row: any) {
  return {
    id: row.id,
    name: row.name,
    servers: JSON.parse(row.servers),
    operations: JSON.parse(row.operations),
    allowed_credential_ids: JSON.parse(row.allowed_credential_ids),
    ip_allowlist: JSON.parse(row.ip_allowlist),
    rate_limit: Number(row.rate_limit),
    expires_at: iso(row.expires_at),
    created_at: iso(row.created_at),
  };
}

/** The tenant's live keys, oldest first (no secrets: only hashes are stored), with when each was last used. */
export async function listAutomationKeys(db: Knex, tenantId: string) {
  const rows = await db("automation_keys")
    .where({ tenant_id: tenantId })
    .whereNull("revoked_at")
    .orderBy("created_at", "asc")
    .select([...KEY_COLUMNS, "last_used_at"]);
  // Not part of presentKey: that is also the scope an audit event records.
  return rows.map((r) => ({ ...presentKey(r), last_used_at: iso(r.last_used_at) }));
}

/** A live (not revoked) key of the tenant; 404 otherwise (another tenant's id too). */
export async function findLiveKey(db: Knex, tenantId: string, id: string) {
  const row = z.uuid().safeParse(id).success
    ? await db("automation_keys")
        .where({ id: id.toLowerCase(), tenant_id: tenantId })
        .whereNull("revoked_at")
        .first(KEY_COLUMNS)
    : undefined;
  if (!row) throw new RcError("RC_ERR_KEY_NOT_FOUND", `automation key '${id}' not found`);
  return row;
}

export async function createAutomationKey(
  db: Knex,
  tenantId: string,
  input: KeyCreateInput,
  who: AuditActor,
) {
  const scope = await compileScope(db, tenantId, input as ScopeInput);
  const { key, row } = newAutomationKeyRow(tenantId, input.name, {
    rate_limit: input.rate_limit ?? 100,
    ...scope,
  });
  const resource = presentKey(row);
  await db.transaction(async (trx) => {
    await trx("automation_keys").insert(row);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "automation_key.created",
      keyId: row.id,
      payload: { key_id: row.id, key_name: row.name, scope: resource, ...who },
    });
  });
  return { ...resource, key };
}

export async function updateAutomationKey(
  db: Knex,
  tenantId: string,
  id: string,
  input: KeyPatchInput,
  who: AuditActor,
) {
  const before = await findLiveKey(db, tenantId, id);
  const changes: Record<string, unknown> = await compileScope(db, tenantId, input as ScopeInput);
  if (input.name !== undefined) changes.name = input.name;
  if (input.rate_limit !== undefined) changes.rate_limit = input.rate_limit;
  const after = presentKey({ ...before, ...changes });
  await db.transaction(async (trx) => {
    await trx("automation_keys").where({ id: before.id }).update(changes);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "automation_key.updated",
      keyId: before.id,
      payload: {
        key_id: before.id,
        key_name: after.name,
        changed: Object.keys(changes).sort(),
        scope: after,
        ...who,
      },
    });
  });
  return after;
}

/** Revokes a live key; `tenantId` null (operator CLI) finds it in any tenant. */
export async function revokeAutomationKey(db: Knex, tenantId: string | null, id: string, who: AuditActor) {
  const tenant =
    tenantId ??
    (z.uuid().safeParse(id).success
      ? (
          await db("automation_keys")
            .where({ id: id.toLowerCase() })
            .first<{ tenant_id: string }>("tenant_id")
        )?.tenant_id
      : undefined);
  if (!tenant) throw new RcError("RC_ERR_KEY_NOT_FOUND", `automation key '${id}' not found`);
  const row = await findLiveKey(db, tenant, id);
  const revokedAt = Date.now();
  await db.transaction(async (trx) => {
    await trx("automation_keys")
      .where({ id: row.id })
      .whereNull("revoked_at")
      .update({ revoked_at: revokedAt });
    await appendAuditEvent(trx, {
      tenantId: tenant,
      eventType: "automation_key.revoked",
      keyId: row.id,
      payload: { key_id: row.id, key_name: row.name, ...who },
    });
  });
  return { key_id: row.id as string, revoked_at: new Date(revokedAt).toISOString() };
}

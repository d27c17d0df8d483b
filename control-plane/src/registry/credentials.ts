// The registry_credentials table: tenant-scoped, password sealed with the master
// key (crypto.ts). Reads never return the password except openCredential, which
// the registry login route calls right before it puts the job on the bus.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { iso } from "../lib/time.js";
import { open, seal } from "./crypto.js";
import { InvalidRegistryAddress, resolveRegistry } from "./registry-address.js";

/** What the API shows of a credential: never the password. */
export interface CredentialView {
  id: string;
  name: string;
  registry_url: string;
  registry_type: string;
  username: string;
  created_at: string | null;
}

interface CredentialRow {
  id: string;
  name: string;
  registry_url: string;
  registry_type: string;
  username: string;
  created_at: number;
}

const VIEW_COLUMNS = ["id", "name", "registry_url", "registry_type", "username", "created_at"];

const view = (r: CredentialRow): CredentialView => ({
  id: r.id,
  name: r.name,
  registry_url: r.registry_url,
  registry_type: r.registry_type,
  username: r.username,
  created_at: iso(Number(r.created_at)),
});

export function requireMasterKey(masterKey: Buffer | undefined): Buffer {
  if (!masterKey) throw new RcError("RC_ERR_MASTER_KEY_UNSET");
  return masterKey;
}

export function resolveOr422(address: string) {
  try {
    return resolveRegistry(address);
  } catch (err) {
    if (err instanceof InvalidRegistryAddress)
      throw new RcError("RC_ERR_VALIDATION", `registry_url: ${err.message}`);
    throw err;
  }
}

export interface NewCredential {
  name: string;
  registry_url: string;
  username: string;
  password: string;
}

export async function createCredential(
  db: Knex,
  masterKey: Buffer,
  tenantId: string,
  actor: { keyId: string; keyName: string },
  input: NewCredential,
): Promise<CredentialView> {
  const resolved = resolveOr422(input.registry_url);
  const taken = await db("registry_credentials").where({ tenant_id: tenantId, name: input.name }).first("id");
  if (taken)
    throw new RcError(
      "RC_ERR_CREDENTIAL_NAME_TAKEN",
      `a registry credential named '${input.name}' already exists`,
    );
  const row: CredentialRow = {
    id: randomUUID(),
    name: input.name,
    ...resolved,
    username: input.username,
    created_at: Date.now(),
  };
  await db.transaction(async (trx) => {
    const insert = trx("registry_credentials").insert({
      ...row,
      tenant_id: tenantId,
      password_ciphertext: seal(masterKey, input.password),
    });
    await appendAuditEvent(
      trx,
      {
        tenantId,
        eventType: "registry_credential.created",
        keyId: actor.keyId,
        payload: { credential_id: row.id, ...view(row), key_name: actor.keyName },
      },
      [insert],
    );
  });
  return view(row);
}

export async function listCredentials(db: Knex, tenantId: string): Promise<CredentialView[]> {
  const rows = await db("registry_credentials")
    .where({ tenant_id: tenantId })
    .orderBy([{ column: "created_at" }, { column: "id" }])
    .select<CredentialRow[]>(VIEW_COLUMNS);
  return rows.map(view);
}

/** Returns false when there was no such credential of the tenant. */
export async function deleteCredential(
  db: Knex,
  tenantId: string,
  actor: { keyId: string; keyName: string },
  id: string,
): Promise<boolean> {
  return db.transaction(async (trx) => {
    const row = await trx("registry_credentials")
      .where({ id: id.toLowerCase(), tenant_id: tenantId })
      .first<CredentialRow | undefined>(VIEW_COLUMNS);
    if (!row) return false;
    await trx("registry_credentials").where({ id: row.id }).delete();
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "registry_credential.deleted",
      keyId: actor.keyId,
      payload: {
        credential_id: row.id,
        name: row.name,
        registry_url: row.registry_url,
        key_name: actor.keyName,
      },
    });
    return true;
  });
}

/** The credential with its password in plaintext, for a login job only. 404 for another tenant's. */
export async function openCredential(db: Knex, masterKey: Buffer, tenantId: string, id: string) {
  const row = await db("registry_credentials")
    .where({ id: id.toLowerCase(), tenant_id: tenantId })
    .first<(CredentialRow & { password_ciphertext: string }) | undefined>([
      ...VIEW_COLUMNS,
      "password_ciphertext",
    ]);
  if (!row) throw new RcError("RC_ERR_CREDENTIAL_NOT_FOUND", `registry credential '${id}' not found`);
  let password: string;
  try {
    password = open(masterKey, row.password_ciphertext);
  } catch (err) {
    throw new RcError("RC_ERR_CREDENTIAL_UNREADABLE", undefined, { cause: err });
  }
  return { ...view(row), password };
}

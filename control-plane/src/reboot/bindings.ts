// The server_providers table: which cloud provider a server runs on, its id
// there, and the API token sealed with the master key (registry/crypto.ts). Reads
// never return the token except openBinding, called right before a provider reboot.
import type { Knex } from "knex";
import { type AuditEventInput, appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { open, seal } from "../registry/crypto.js";
import type { ProviderName } from "./providers/provider.js";

export interface BindingInput {
  provider: ProviderName;
  provider_server_id: string;
  token: string;
}

/** What the API shows of a binding: never the token. */
export interface BindingView {
  server_id: string;
  provider: ProviderName;
  provider_server_id: string;
}

type Actor = Pick<AuditEventInput, "keyId"> & { payload: Record<string, unknown> };

async function tenantServer(
  db: Knex,
  tenantId: string,
  serverId: string,
): Promise<{ id: string; name: string }> {
  const row = await db("servers")
    .where({ id: serverId.toLowerCase(), tenant_id: tenantId })
    .first<{ id: string; name: string } | undefined>("id", "name");
  if (!row) throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
  return row;
}

/** Creates or replaces the server's binding (one per server). */
export async function bindProvider(
  db: Knex,
  masterKey: Buffer,
  tenantId: string,
  serverId: string,
  input: BindingInput,
  actor: Actor,
): Promise<BindingView> {
  const server = await tenantServer(db, tenantId, serverId);
  const row = {
    server_id: server.id,
    tenant_id: tenantId,
    provider: input.provider,
    provider_server_id: input.provider_server_id,
    token_ciphertext: seal(masterKey, input.token),
    created_at: Date.now(),
  };
  const view: BindingView = {
    server_id: server.id,
    provider: input.provider,
    provider_server_id: input.provider_server_id,
  };
  await db.transaction(async (trx) => {
    await trx("server_providers").where({ server_id: server.id }).delete();
    await trx("server_providers").insert(row);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "server_provider.bound",
      keyId: actor.keyId,
      serverId: server.id,
      payload: { ...view, server_name: server.name, ...actor.payload },
    });
  });
  return view;
}

export async function unbindProvider(
  db: Knex,
  tenantId: string,
  serverId: string,
  actor: Actor,
): Promise<void> {
  const server = await tenantServer(db, tenantId, serverId);
  await db.transaction(async (trx) => {
    const n = await trx("server_providers").where({ server_id: server.id, tenant_id: tenantId }).delete();
    if (n === 0)
      throw new RcError("RC_ERR_PROVIDER_NOT_BOUND", `server '${server.name}' has no cloud provider binding`);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "server_provider.unbound",
      keyId: actor.keyId,
      serverId: server.id,
      payload: { server_id: server.id, server_name: server.name, ...actor.payload },
    });
  });
}

export interface OpenedBinding extends BindingView {
  /** Plaintext token; undefined when it does not decrypt (master key changed or unset). */
  token: string | undefined;
}

/** The server's binding with its token opened, or undefined when it has none. */
export async function openBinding(
  db: Knex,
  masterKey: Buffer | undefined,
  serverId: string,
): Promise<OpenedBinding | undefined> {
  const row = await db("server_providers")
    .where({ server_id: serverId })
    .first<(BindingView & { token_ciphertext: string }) | undefined>(
      "server_id",
      "provider",
      "provider_server_id",
      "token_ciphertext",
    );
  if (!row) return undefined;
  let token: string | undefined;
  try {
    token = masterKey ? open(masterKey, row.token_ciphertext) : undefined;
  } catch {
    token = undefined;
  }
  return {
    server_id: row.server_id,
    provider: row.provider,
    provider_server_id: row.provider_server_id,
    token,
  };
}

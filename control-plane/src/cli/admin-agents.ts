// `admin revoke-agent`: an agent credential (rag_) stops working at once. The
// stored hash is cleared, so the gateway refuses the credential on its next
// connect ("unknown or revoked agent credential"); the server keeps its id,
// applications and history, and a new join token enrolls it again.
import type { Command } from "commander";
import type { Knex } from "knex";
import { isUuid } from "../http/validation.js";
import { revokeAgentCredential } from "../auth/agent-credentials.js";
import { OPERATOR_ACTOR } from "../auth/automation-key-service.js";
import { AdminError, resolveTenant } from "./admin.js";

type WithDb = (fn: (db: Knex) => Promise<unknown>) => Promise<void>;

interface ServerRow {
  id: string;
  name: string;
  tenant_id: string;
}

/** A server by id, or by name (in --tenant when several tenants use that name). */
async function findServer(db: Knex, idOrName: string, tenant?: string): Promise<ServerRow> {
  const q = db("servers").select<ServerRow[]>("id", "name", "tenant_id");
  if (tenant) q.where({ tenant_id: (await resolveTenant(db, tenant)).id });
  const rows = await (isUuid(idOrName)
    ? q.where({ id: idOrName.toLowerCase() })
    : q.where({ name: idOrName }));
  if (rows.length === 0) throw new AdminError(`server '${idOrName}' not found`);
  if (rows.length > 1)
    throw new AdminError(`server name '${idOrName}' is used by several tenants: add --tenant`);
  return rows[0];
}

export async function revokeAgent(db: Knex, opts: { server: string; tenant?: string }) {
  return revokeAgentCredential(db, await findServer(db, opts.server, opts.tenant), OPERATOR_ACTOR);
}

export function registerAgentCommands(admin: Command, withDb: WithDb): void {
  admin
    .command("revoke-agent")
    .description("revoke a server's agent credential now: the gateway refuses it from its next connect")
    .requiredOption("--server <id|name>", "the server whose agent credential is revoked")
    .option("--tenant <id|name>", "tenant of the server (needed when the name is used by several)")
    .action((o: { server: string; tenant?: string }) => withDb((db) => revokeAgent(db, o)));
}

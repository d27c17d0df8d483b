// Server lookup for Automation calls: scoped by tenant (another tenant's id is a
// 404, never a 403) and by the key's server scope (403).
import type { Knex } from "knex";
import type { AutomationPrincipal } from "../../auth/automation-key.js";
import type { JobBus } from "../../bus/job-bus.js";
import { RcError } from "../../errors.js";

export interface ServerRef {
  id: string;
  name: string;
}

/**
 * The tenant's servers, oldest first (GET /api/servers), each `connected` when a
 * gateway (any instance) holds its agent's stream now: asked of the bus, not
 * inferred from last_seen_at, so the dashboard's "live" is the dispatch path's truth.
 */
export async function listServers(db: Knex, bus: JobBus, tenantId: string) {
  const rows = await db("servers")
    .where({ tenant_id: tenantId })
    .orderBy("created_at", "asc")
    .select("id", "name", "hostname", "agent_version", "last_seen_at");
  const connected = await bus.connectedServers(rows.map((r) => r.id as string));
  return rows.map((r) => ({
    id: r.id as string,
    name: r.name as string,
    hostname: r.hostname as string | null,
    agent_version: r.agent_version as string | null,
    last_seen_at: r.last_seen_at === null ? null : new Date(Number(r.last_seen_at)).toISOString(),
    connected: connected.has(r.id as string),
  }));
}

export async function findServer(
  db: Knex,
  principal: AutomationPrincipal,
  serverId: string,
): Promise<ServerRef> {
  const row = await db("servers")
    .where({ id: serverId.toLowerCase(), tenant_id: principal.tenantId })
    .first<ServerRef | undefined>("id", "name");
  if (!row) throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
  if (principal.servers.length > 0 && !principal.servers.includes(row.id)) {
    throw new RcError("RC_ERR_FORBIDDEN", `server '${row.name}' is outside this key's server scope`);
  }
  return row;
}

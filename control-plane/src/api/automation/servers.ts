// Server lookup for Automation calls: scoped by tenant (another tenant's id is a
// 404, never a 403) and by the key's server scope (403).
import type { Knex } from "knex";
import type { AutomationPrincipal } from "../../auth/automation-key.js";
import type { JobBus } from "../../bus/job-bus.js";
import { RcError } from "../../errors.js";
import { placeholders, runStatement } from "../../db/statement.js";
import { Coalescer } from "../../lib/coalescer.js";

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

interface ServerRow extends ServerRef {
  tenant_id: string;
}

/**
 * Server lookups of one process, coalesced: the servers asked for while a read
 * is in flight are read together by the next one (one round trip for many
 * requests under load, none added when idle). Each read is of the table as it
 * is then — nothing is cached, so a server deleted before a request's read is
 * not found by it.
 */
const lookups = new WeakMap<Knex, Coalescer<string, ServerRow | undefined>>();

function lookupOf(db: Knex): Coalescer<string, ServerRow | undefined> {
  let c = lookups.get(db);
  if (!c) {
    c = new Coalescer(async (ids) => {
      const unique = [...new Set(ids)];
      const rows = await runStatement<ServerRow>(db, {
        sql: `SELECT \`id\`, \`name\`, \`tenant_id\` FROM \`servers\` WHERE \`id\` IN (${placeholders(unique.length)})`,
        bindings: unique,
      });
      const byId = new Map(rows.map((r) => [r.id, r]));
      return ids.map((id) => byId.get(id));
    }, 200);
    lookups.set(db, c);
  }
  return c;
}

export async function findServer(
  db: Knex,
  principal: AutomationPrincipal,
  serverId: string,
): Promise<ServerRef> {
  const row = await lookupOf(db).submit(serverId.toLowerCase());
  // Another tenant's server is as unknown as a missing one.
  if (!row || row.tenant_id !== principal.tenantId)
    throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
  if (principal.servers.length > 0 && !principal.servers.includes(row.id)) {
    throw new RcError("RC_ERR_FORBIDDEN", `server '${row.name}' is outside this key's server scope`);
  }
  return { id: row.id, name: row.name };
}

// The tenant's servers as callers see them: the list (GET /api/servers) and the
// lookup of Automation calls, scoped by tenant (another tenant's id is a 404,
// never a 403) and by the key's server scope (403).
import type { Knex } from "knex";
import type { Principal } from "../auth/principal.js";
import type { JobBus } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { requireServerScope } from "./scope.js";
import { placeholders, runStatement } from "../db/statement.js";
import { Coalescer } from "../lib/coalescer.js";
import { labelsOf } from "../fleets/labels.js";

export interface ServerRef {
  id: string;
  name: string;
}

const SERVER_COLUMNS = [
  "id",
  "name",
  "hostname",
  "agent_version",
  "last_seen_at",
  "connected_at",
  "booted_at",
  "created_at",
  "engine_name",
  "engine_version",
  "engine_ok",
  "engine_detail",
  "proxy_kind",
  "proxy_ok",
  "proxy_detail",
  "labels",
];

const isoOf = (ms: unknown) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());

/**
 * A server as the API shows it. last_seen_at is the agent's last heartbeat as
 * stored (at most PRESENCE_EVERY intervals old while connected, gateway/presence.ts),
 * connected_at when its current (or last) stream was opened, booted_at when its
 * machine booted.
 */
export function presentServer(r: Record<string, unknown>, connected: boolean) {
  return {
    id: r.id as string,
    name: r.name as string,
    hostname: r.hostname as string | null,
    agent_version: r.agent_version as string | null,
    last_seen_at: isoOf(r.last_seen_at),
    connected,
    connected_at: isoOf(r.connected_at),
    booted_at: isoOf(r.booted_at),
    created_at: isoOf(r.created_at),
    engine: engineOf(r),
    proxy: proxyOf(r),
    labels: labelsOf(r.labels),
  };
}

/**
 * The tenant's servers, oldest first (GET /api/servers), each `connected` when a
 * gateway (any instance) holds its agent's stream now: asked of the bus, not
 * inferred from last_seen_at, so the dashboard's "live" is the dispatch path's truth.
 * Removed servers (removal.ts) are left out.
 */
export async function listServers(db: Knex, bus: JobBus, tenantId: string) {
  const rows = await db("servers")
    .where({ tenant_id: tenantId, removed_at: null })
    .orderBy("created_at", "asc")
    .select(SERVER_COLUMNS);
  const connected = await bus.connectedServers(rows.map((r) => r.id as string));
  return rows.map((r) => presentServer(r, connected.has(r.id as string)));
}

/**
 * The container engine the agent last reported (gateway/engine-status.ts), or
 * null when it never did. name and version are null when not known (auto found
 * no engine working; a version only when ok).
 */
function engineOf(r: Record<string, unknown>) {
  if (r.engine_ok === null || r.engine_ok === undefined) return null;
  return {
    name: (r.engine_name as string) || null,
    version: (r.engine_version as string) || null,
    ok: Boolean(Number(r.engine_ok)),
    detail: (r.engine_detail as string | null) ?? "",
  };
}

/**
 * The reverse proxy the agent last reported (gateway/proxy-status.ts), or null
 * when it never did. kind none is ok: deployments only record where apps listen.
 */
function proxyOf(r: Record<string, unknown>) {
  if (r.proxy_ok === null || r.proxy_ok === undefined) return null;
  return {
    kind: (r.proxy_kind as string | null) ?? "",
    ok: Boolean(Number(r.proxy_ok)),
    detail: (r.proxy_detail as string | null) ?? "",
  };
}

interface ServerRow extends ServerRef {
  tenant_id: string;
}

/**
 * Server lookups of one process, coalesced: the servers asked for while a read
 * is in flight are read together by the next one (one round trip for many
 * requests under load, none added when idle).
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

/**
 * Servers found, by id, per database. What is kept never changes: a server's
 * row is created by its first enrollment and its id, name and tenant are never
 * updated, and nothing in relayctl deletes a server row (a re-enrollment updates
 * only its credential and host fields, which are not kept here; a removal,
 * removal.ts, revokes the credential and keeps the row, so a removed server
 * stays found here and its operations are refused as not connected). So a found
 * server needs no invalidation, on any instance; an id not found is never kept
 * (it may be enrolled the next moment). Under exec-throughput's load this took
 * a coalesced round trip off every call (bench/README.md, issue 17). Should
 * servers ever be renamed or deleted, this must be invalidated as keys are.
 */
const found = new WeakMap<Knex, Map<string, ServerRow>>();
const MAX_KNOWN_SERVERS = 50_000;

async function serverRow(db: Knex, id: string): Promise<ServerRow | undefined> {
  let known = found.get(db);
  if (!known) {
    known = new Map();
    found.set(db, known);
  }
  const cached = known.get(id);
  if (cached) return cached;
  const row = await lookupOf(db).submit(id);
  if (row) {
    if (known.size >= MAX_KNOWN_SERVERS) known.clear();
    known.set(id, row);
  }
  return row;
}

export async function findServer(db: Knex, principal: Principal, serverId: string): Promise<ServerRef> {
  const row = await serverRow(db, serverId.toLowerCase());
  // Another tenant's server is as unknown as a missing one (checked on every call).
  if (!row || row.tenant_id !== principal.tenantId)
    throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
  const server = { id: row.id, name: row.name };
  requireServerScope(principal, server);
  return server;
}

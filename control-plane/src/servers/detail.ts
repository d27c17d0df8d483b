// GET /api/servers/{id}: one server as its page shows it (issue 31, defect 7):
// the list's fields, the applications that live on it and its recent operations.
import type { Knex } from "knex";
import type { JobBus } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { fleetApplicationsPlacedOn } from "../fleets/placement.js";
import { presentServer } from "./servers.js";

/** Operations shown on a server's page; the Activity page has the rest. */
export const RECENT_OPERATIONS = 10;

const isoOf = (ms: unknown) => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());

/** The tenant's server (not removed), or 404: another tenant's is as unknown as a missing one. */
export async function serverRowOf(db: Knex, tenantId: string, serverId: string) {
  const row = await db("servers")
    .where({ id: serverId.toLowerCase(), tenant_id: tenantId, removed_at: null })
    .first<Record<string, unknown> | undefined>();
  if (!row) throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
  return row;
}

/** The applications placed on the server, by name: its own, and fleets whose placement names it (fleets/placement.ts). */
export async function applicationsOn(db: Knex, tenantId: string, serverId: string) {
  const own = await db("applications")
    .where({ tenant_id: tenantId, server_id: serverId })
    .select<{ id: string; name: string }[]>("id", "name");
  const fleets = await fleetApplicationsPlacedOn(db, tenantId, serverId);
  const all = [...own, ...fleets.filter((f) => !own.some((o) => o.id === f.id))];
  return all.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function recentOperations(db: Knex, tenantId: string, serverId: string) {
  const rows = await db("operations as o")
    .leftJoin("deployments as d", "d.operation_id", "o.id")
    .leftJoin("applications as a", "a.id", "d.application_id")
    .where({ "o.tenant_id": tenantId, "o.server_id": serverId })
    .orderBy("o.started_at", "desc")
    .limit(RECENT_OPERATIONS)
    .select(
      "o.id",
      "o.operation_type",
      "o.status",
      "o.exit_code",
      "o.run_id",
      "o.started_at",
      "o.completed_at",
      "d.id as deployment_id",
      "d.application_id",
      "a.name as application_name",
    );
  return rows.map((r) => ({
    operation_id: r.id as string,
    operation_type: r.operation_type as string,
    status: r.status as string,
    exit_code: r.exit_code === null ? null : Number(r.exit_code),
    run_id: (r.run_id as string | null) ?? null,
    started_at: isoOf(r.started_at),
    completed_at: isoOf(r.completed_at),
    deployment_id: (r.deployment_id as string | null) ?? null,
    application_id: (r.application_id as string | null) ?? null,
    application_name: (r.application_name as string | null) ?? null,
  }));
}

export async function serverDetail(db: Knex, bus: JobBus, tenantId: string, serverId: string) {
  const row = await serverRowOf(db, tenantId, serverId);
  const id = row.id as string;
  const [connected, applications, operations] = await Promise.all([
    bus.connectedServers([id]),
    applicationsOn(db, tenantId, id),
    recentOperations(db, tenantId, id),
  ]);
  return { ...presentServer(row, connected.has(id)), applications, recent_operations: operations };
}

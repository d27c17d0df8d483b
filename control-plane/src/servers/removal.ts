// Removing a server (DELETE /api/servers/{id}, issue 31, defect 7): its agent
// credential is revoked (cleared, as `admin revoke-agent` does), the server
// leaves the lists, and its live stream is closed at once. The row stays: its
// operations and audit events name it, and a new join token with its name
// enrolls it again (auth/agent-credentials.ts clears removed_at). Refused while
// applications live on it: their containers would keep running with no agent
// left to deploy, restart or remove them.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import type { JobBus } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { applicationsOn, serverRowOf } from "./detail.js";

export async function removeServer(
  db: Knex,
  bus: JobBus,
  tenantId: string,
  serverId: string,
  actor: Record<string, unknown>,
) {
  const server = await serverRowOf(db, tenantId, serverId);
  const id = server.id as string;
  const name = server.name as string;
  const removedAt = Date.now();
  await db.transaction(async (trx) => {
    // The server's row locked first (MySQL): two removals at once audit one, and the
    // applications are read after the lock, just before the row changes.
    await trx("servers").where({ id }).forUpdate().first("id");
    const apps = await applicationsOn(trx, tenantId, id);
    if (apps.length > 0) throw hasApplications(name, apps);
    const changed = await trx("servers")
      .where({ id, removed_at: null })
      .update({ agent_credential_hash: null, removed_at: removedAt });
    if (changed !== 1) throw new RcError("RC_ERR_SERVER_NOT_FOUND", `server '${serverId}' not found`);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "server.removed",
      serverId: id,
      payload: { server_id: id, server_name: name, ...actor },
    });
  });
  // A takeover no stream holds: the gateway holding the agent's stream closes it
  // now (gateway/registry.ts); its credential watch would within a heartbeat interval.
  bus.publishTakeover(id, randomUUID());
  return { server_id: id, server_name: name, removed_at: new Date(removedAt).toISOString() };
}

/** 409 naming the applications and what removing the server would do to them. */
function hasApplications(server: string, apps: { name: string }[]): RcError {
  const one = apps.length === 1;
  const names = apps.map((a) => a.name).join(", ");
  return new RcError(
    "RC_ERR_SERVER_HAS_APPLICATIONS",
    `server '${server}' still has ${one ? "an application" : `${apps.length} applications`} (${names}): ` +
      `delete ${one ? "it" : "them"} or move ${one ? "it" : "them"} to another server first; removing the server ` +
      `would leave ${one ? "its container" : "their containers"} running with no agent to manage ${one ? "it" : "them"}`,
  );
}

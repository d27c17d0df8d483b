// A deleted application's containers and images leave its server too (issue 29).
// The deletion writes a pending cleanup (application_cleanups, in its own
// transaction) and asks the agent at once; an agent that is away is asked again
// by the gateway when it says Hello (gateway/agent-stream.ts). The pending row
// goes when the agent reports everything removed (a CleanupReport: the
// completion hook below, in the operation's final transaction), so a cleanup is
// never lost between the two. Each request is an operation of type app_cleanup,
// audited like every other.
import type { Knex } from "knex";
import type { CompletionHook } from "../operations/finish.js";
import type { Outcome, ServerRef } from "../operations/outcome.js";
import type { OperationService } from "../operations/service.js";

/** The agent's deadline: rm -f of a few containers and image rm of a few images. */
const DEADLINE_SECONDS = 120;

export interface CleanupTarget {
  tenantId: string;
  server: ServerRef;
  applicationId: string;
  applicationName: string;
}

/** A cleanup to do, written in the deletion's transaction. */
export function pendingCleanupRow(t: CleanupTarget) {
  return {
    application_id: t.applicationId,
    tenant_id: t.tenantId,
    server_id: t.server.id,
    application_name: t.applicationName.slice(0, 128),
    requested_at: Date.now(),
  };
}

/** Starts the cleanup operation and hands it to the agent; waits up to waitMs (0: not at all). */
export async function requestCleanup(
  ops: OperationService,
  t: CleanupTarget,
  audit: Record<string, unknown>,
  waitMs: number,
): Promise<Outcome> {
  const op = await ops.start({
    tenantId: t.tenantId,
    server: t.server,
    operationType: "app_cleanup",
    keyId: null,
    runId: null,
    deadlineSeconds: DEADLINE_SECONDS,
    audit: { ...audit, application_id: t.applicationId, application_name: t.applicationName },
  });
  const cleanup = { applicationId: t.applicationId, deadlineSeconds: DEADLINE_SECONDS };
  return ops.run(op, { $case: "cleanup", cleanup }, waitMs);
}

/** The cleanups a server's agent still owes. */
export async function pendingCleanups(db: Knex, serverId: string): Promise<CleanupTarget[]> {
  const rows = await db("application_cleanups as c")
    .join("servers as s", "s.id", "c.server_id")
    .where({ "c.server_id": serverId })
    .orderBy("c.requested_at", "asc")
    .select<{ application_id: string; tenant_id: string; application_name: string; server_name: string }[]>(
      "c.application_id",
      "c.tenant_id",
      "c.application_name",
      "s.name as server_name",
    );
  return rows.map((r) => ({
    tenantId: r.tenant_id,
    server: { id: serverId, name: r.server_name },
    applicationId: r.application_id,
    applicationName: r.application_name,
  }));
}

/** The agent reported the application's containers and images gone: nothing is pending any more. */
export const cleanupDone: CompletionHook = async (trx, operationId, detail) => {
  if (detail?.$case !== "cleanup") return;
  // Only a cleanup of the operation's own server: an agent cannot end another server's.
  const op = await trx("operations")
    .where({ id: operationId })
    .first<{ server_id: string } | undefined>("server_id");
  if (!op) return;
  await trx("application_cleanups")
    .where({ application_id: detail.cleanup.applicationId, server_id: op.server_id })
    .delete();
};

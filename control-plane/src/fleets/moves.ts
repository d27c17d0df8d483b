// A placement that moves (a label change, a list edited): the servers a rollout
// deploys to take the application, and once the rollout succeeded the servers
// that left it give it up, as a deleted application leaves a server
// (applications/cleanup.ts: a pending cleanup, sent now and again at the agent's
// next Hello; the agent takes the route off its proxy, then removes the
// containers and images). A halted rollout moves nothing.
import type { Knex } from "knex";
import type { Logger } from "pino";
import { pendingCleanupRow, requestCleanup } from "../applications/cleanup.js";
import type { OperationService } from "../operations/service.js";
import type { ServerRef } from "../servers/servers.js";

/**
 * Before the rollout: a cleanup still pending on a target server (it left the
 * placement while its agent was away, and is back in it) would remove what this
 * rollout deploys there at the agent's next Hello.
 */
export async function keepOnTargets(db: Knex, applicationId: string, targets: ServerRef[]): Promise<void> {
  await db("application_cleanups")
    .where({ application_id: applicationId })
    .whereIn(
      "server_id",
      targets.map((s) => s.id),
    )
    .delete();
}

/** After a rollout that succeeded: the servers the application ran on that are no longer targets. */
export async function releaseLeavers(
  db: Knex,
  ops: OperationService,
  log: Logger,
  app: { id: string; name: string; tenant_id: string },
  targets: ServerRef[],
  rolloutId: string,
): Promise<ServerRef[]> {
  const leavers = await db("deployments as d")
    .join("servers as s", "s.id", "d.server_id")
    .where({ "d.application_id": app.id })
    .whereNotIn(
      "d.server_id",
      targets.map((s) => s.id),
    )
    .distinct("s.id", "s.name")
    .select<ServerRef[]>();
  for (const server of leavers) {
    const target = { tenantId: app.tenant_id, server, applicationId: app.id, applicationName: app.name };
    await db("application_cleanups")
      .insert(pendingCleanupRow(target))
      .onConflict(["application_id", "server_id"])
      .merge();
    const audit = { reason: "the server left the application's placement", rollout_id: rolloutId };
    await requestCleanup(ops, target, audit, 0).catch((err) =>
      log.warn({ err, server_id: server.id }, "cleanup not sent; the agent gets it at its next Hello"),
    );
  }
  return leavers;
}

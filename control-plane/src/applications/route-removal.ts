// Takes an application's route off a server's proxy: a route-sync job with no
// routes that removes the application (and prunes any other application that no
// longer exists on that server). Waits a short while for the agent's report.
import type { ApiContext } from "../http/context.js";
import { type RouteJobOutcome, runRouteJob } from "../external-deploy/route-job.js";

const WAIT_MS = 15_000;

export interface RemovalTarget {
  tenantId: string;
  serverId: string;
  applicationId: string;
  ip: string;
}

export async function removeRoute(ctx: ApiContext, t: RemovalTarget): Promise<RouteJobOutcome> {
  const server = await ctx
    .db("servers")
    .where({ id: t.serverId })
    .first<{ id: string; name: string }>("id", "name");
  return runRouteJob(
    ctx,
    {
      tenantId: t.tenantId,
      server,
      keyId: null,
      runId: null,
      ip: t.ip,
      audit: { reason: "application removed from this server", application_id: t.applicationId },
      routes: [],
      remove: [t.applicationId],
    },
    WAIT_MS,
  );
}

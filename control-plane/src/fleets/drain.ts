// A server's drain during a rollout (issue 33 "Traffic"): a route-sync job that
// marks the application draining on that server's proxy (its health path
// /.well-known/relayctl/health answers 503, so a load balancer takes the server
// out) or live again. The job is an ordinary route_sync operation with its audit
// event, nothing more. A drain that does not take is logged, never fatal: the
// deployment itself still runs, only the load balancer was not warned.
import { RouteOutcomeStatus } from "@relayctl/proto";
import type { Logger } from "pino";
import type { OperationService } from "../operations/service.js";
import type { ServerRef } from "../servers/servers.js";

/** A Caddy load or an nginx -t + reload, on an agent that is there. */
const DEADLINE_SECONDS = 60;

export interface DrainSpec {
  tenantId: string;
  server: ServerRef;
  keyId: string | null;
  runId: string;
  rolloutId: string;
  applicationId: string;
  draining: boolean;
}

/** True when the agent applied the drain state. */
export async function setDraining(ops: OperationService, log: Logger, spec: DrainSpec): Promise<boolean> {
  const ids = [spec.applicationId];
  try {
    const op = await ops.start({
      tenantId: spec.tenantId,
      server: spec.server,
      operationType: "route_sync",
      keyId: spec.keyId,
      runId: spec.runId,
      deadlineSeconds: DEADLINE_SECONDS,
      audit: { rollout_id: spec.rolloutId, application_id: spec.applicationId, draining: spec.draining },
    });
    const routeSync = {
      routes: [],
      knownApplicationIds: [],
      removeApplicationIds: [],
      deadlineSeconds: DEADLINE_SECONDS,
      drainApplicationIds: spec.draining ? ids : [],
      undrainApplicationIds: spec.draining ? [] : ids,
    };
    const out = await ops.run(op, { $case: "routeSync", routeSync }, DEADLINE_SECONDS * 1000);
    const report =
      out.state === "finished" && out.detail?.$case === "routeSync" ? out.detail.routeSync : undefined;
    const failed = report?.routes.some((r) => r.status === RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_FAILED);
    if (out.state === "finished" && out.status === "completed" && !failed) return true;
    log.warn(
      { rollout_id: spec.rolloutId, server: spec.server.name, outcome: out.state },
      "drain not applied",
    );
  } catch (err) {
    log.warn({ err, rollout_id: spec.rolloutId, server: spec.server.name }, "drain not applied");
  }
  return false;
}

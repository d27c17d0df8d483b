// One route-sync job on one server's agent: record the operation with its audit
// event (nothing runs unaudited), dispatch it, wait for the agent's report (a
// RouteSyncReport in the result's detail). Used by application deletion and live
// routes (runRouteJob) and by external-deploy sync, whose operation starts with its
// claims (claim-start.ts, then awaitRouteJob).
import { RouteOutcomeStatus, type RouteSyncJob, type RouteSyncReport } from "@relayctl/proto";
import type { ApiContext } from "../http/context.js";
import { applicationIdsOfServer } from "../applications/store.js";
import { BusUnavailableError } from "../bus/job-bus.js";
import type { StartedOperation } from "../operations/outcome.js";
import type { FinalResult, FinalStatus } from "../operations/store.js";

/** What the agent reported for one route (its RouteSyncReport, in the control plane's names). */
export interface AgentRouteOutcome {
  application_id: string;
  status: "synced" | "noop" | "drift_recovered" | "failed";
  signature_hash: string;
  fqdns: string[];
  upstream: string;
  error?: string;
}

export interface AgentReport {
  proxy: string;
  routes: AgentRouteOutcome[];
  removed: string[];
}

/** One route to write, as the control plane names its fields. */
export interface RouteEntry {
  application_id: string;
  container_name: string;
  container_port: number;
  image_tag: string;
  fqdns: string[];
}

export type RouteJobOutcome = (
  | { state: "not_connected"; operationId: string; reason: string }
  | { state: "running"; operationId: string; reason: string }
  | { state: "failed"; operationId: string; reason: string }
  | { state: "reported"; operationId: string; report: AgentReport }
) & {
  /** The operation's completion stored the settlement asked with the job (settle.ts). */
  settled?: boolean;
};

export interface RouteJobSpec {
  tenantId: string;
  server: { id: string; name: string };
  keyId: string | null;
  runId: string | null;
  ip: string;
  audit: Record<string, unknown>;
  routes: RouteEntry[];
  remove: string[];
  /** The server's applications (applicationIdsOfServer), when the caller read them already. */
  known?: string[];
}

/** The agent's deadline for one job: a Caddy load or an nginx -t + reload. */
export const DEADLINE_SECONDS = 120;

/** The operation's audit fields for the routes and removals it carries. */
export function routeJobAudit(spec: Pick<RouteJobSpec, "audit" | "routes" | "remove" | "ip">) {
  return { ...spec.audit, routes: spec.routes, remove_application_ids: spec.remove, ip: spec.ip };
}

export async function runRouteJob(
  ctx: ApiContext,
  spec: RouteJobSpec,
  waitMs: number,
): Promise<RouteJobOutcome> {
  const known = spec.known ?? (await applicationIdsOfServer(ctx.db, spec.server.id));
  const op = await ctx.ops.start({
    tenantId: spec.tenantId,
    server: spec.server,
    operationType: "route_sync",
    keyId: spec.keyId,
    runId: spec.runId,
    deadlineSeconds: DEADLINE_SECONDS,
    audit: routeJobAudit(spec),
  });
  return awaitRouteJob(ctx, op, { ...spec, known }, waitMs);
}

/**
 * Dispatches the job of a route_sync operation already started (by runRouteJob,
 * or with the sync's claims: claim-start.ts) and waits for the agent's report.
 */
export async function awaitRouteJob(
  ctx: ApiContext,
  op: StartedOperation,
  spec: Pick<RouteJobSpec, "routes" | "remove" | "server"> & { known: string[] },
  waitMs: number,
  /** What the completion is to store with the final state (settle.ts), told to the gateway with the job. */
  settle?: unknown,
): Promise<RouteJobOutcome> {
  const routeSync: RouteSyncJob = {
    routes: spec.routes.map((r) => ({
      applicationId: r.application_id,
      containerName: r.container_name,
      containerPort: r.container_port,
      imageTag: r.image_tag,
      fqdns: r.fqdns,
    })),
    knownApplicationIds: spec.known,
    removeApplicationIds: spec.remove,
    deadlineSeconds: DEADLINE_SECONDS,
    drainApplicationIds: [],
    undrainApplicationIds: [],
  };
  // The plan rides on the hint (the chain head as the start left it): without one, the
  // gateway's completion could not commit on a guessed head anyway, and the caller settles.
  const told = settle !== undefined && op.hint ? { ...op, hint: { ...op.hint, settle } } : op;
  const outcome = await ctx.ops.run(told, { $case: "routeSync", routeSync }, waitMs);
  const operationId = op.id;
  const server = spec.server.name;
  if (outcome.state === "not_run") {
    // Per-entry errors are for an agent that is away; a bus that is down fails the whole call (503).
    if (outcome.cause === "bus_unavailable") throw new BusUnavailableError();
    return { state: "not_connected", operationId, reason: outcome.reason };
  }
  if (outcome.state === "running") {
    const reason = `the agent of server '${server}' did not report within ${Math.round(waitMs / 1000)} s (operation ${operationId} is still running)`;
    return { state: "running", operationId, reason };
  }
  return {
    ...finishedOutcome(operationId, server, outcome.status, outcome.result.stderr, outcome.detail),
    settled: outcome.settled,
  };
}

/** A finished route_sync operation's outcome: what the api answers and the gateway settles (settle.ts) alike. */
export function finishedOutcome(
  operationId: string,
  server: string,
  status: FinalStatus,
  stderr: string,
  detail: FinalResult["detail"],
): RouteJobOutcome {
  if (status !== "completed") {
    const why = stderr.trim() || status;
    return { state: "failed", operationId, reason: `route sync on server '${server}' ${status}: ${why}` };
  }
  if (detail?.$case !== "routeSync") {
    return { state: "failed", operationId, reason: `the agent of server '${server}' sent no route report` };
  }
  return { state: "reported", operationId, report: fromReport(detail.routeSync) };
}

const STATUS: Record<RouteOutcomeStatus, AgentRouteOutcome["status"] | undefined> = {
  [RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_SYNCED]: "synced",
  [RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_NOOP]: "noop",
  [RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_DRIFT_RECOVERED]: "drift_recovered",
  [RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_FAILED]: "failed",
  [RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_UNSPECIFIED]: undefined,
  [RouteOutcomeStatus.UNRECOGNIZED]: undefined,
};

function fromReport(r: RouteSyncReport): AgentReport {
  return {
    proxy: r.proxy,
    routes: r.routes.map((o) => ({
      application_id: o.applicationId,
      // A status this control plane does not know (a newer agent) is not a success.
      status: STATUS[o.status] ?? "failed",
      signature_hash: o.signatureHash,
      fqdns: o.fqdns,
      upstream: o.upstream,
      ...(o.error || !STATUS[o.status] ? { error: o.error || `unknown route status ${o.status}` } : {}),
    })),
    removed: r.removedApplicationIds,
  };
}

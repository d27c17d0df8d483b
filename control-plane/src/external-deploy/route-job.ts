// One route-sync job on one server's agent: record the operation with its audit
// event (nothing runs unaudited), dispatch it, wait for the agent's report and
// parse it. Used by external-deploy sync and by application deletion.
import type { RouteSyncEnvelope } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { dispatchAndWait } from "../operations/dispatch.js";
import { createOperation } from "../operations/store.js";
import type { ApiContext } from "../api/context.js";
import { applicationIdsOfServer } from "../applications/store.js";

/** What the agent reports per route (proto RouteSyncJob's result format). */
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

export type RouteJobOutcome =
  | { state: "not_connected"; operationId: string; reason: string }
  | { state: "running"; operationId: string; reason: string }
  | { state: "failed"; operationId: string; reason: string }
  | { state: "reported"; operationId: string; report: AgentReport };

export interface RouteJobSpec {
  tenantId: string;
  server: { id: string; name: string };
  keyId: string | null;
  runId: string | null;
  ip: string;
  audit: Record<string, unknown>;
  routes: RouteSyncEnvelope["routes"];
  remove: string[];
}

/** The agent's deadline for one job: a Caddy load or an nginx -t + reload. */
const DEADLINE_SECONDS = 120;

export async function runRouteJob(
  ctx: ApiContext,
  spec: RouteJobSpec,
  waitMs: number,
): Promise<RouteJobOutcome> {
  const known = await applicationIdsOfServer(ctx.db, spec.server.id);
  const { id } = await createOperation(ctx.db, {
    tenantId: spec.tenantId,
    serverId: spec.server.id,
    operationType: "route_sync",
    keyId: spec.keyId,
    runId: spec.runId,
    leaseMs: ctx.config.leaseMs,
    deadlineAt: Date.now() + DEADLINE_SECONDS * 1000,
    audit: {
      ...spec.audit,
      routes: spec.routes,
      remove_application_ids: spec.remove,
      server_id: spec.server.id,
      server_name: spec.server.name,
      ip: spec.ip,
    },
  });
  const job = {
    operation_id: id,
    route_sync: {
      routes: spec.routes,
      known_application_ids: known,
      remove_application_ids: spec.remove,
      deadline_seconds: DEADLINE_SECONDS,
    },
  };
  let outcome: Awaited<ReturnType<typeof dispatchAndWait>>;
  try {
    outcome = await dispatchAndWait(ctx.db, ctx.bus, { operationId: id, server: spec.server }, job, waitMs);
  } catch (err) {
    if (err instanceof RcError && err.code === "RC_ERR_SERVER_NOT_CONNECTED") {
      return { state: "not_connected", operationId: id, reason: err.detail };
    }
    throw err;
  }
  if (outcome.state === "running") {
    const reason = `the agent of server '${spec.server.name}' did not report within ${Math.round(waitMs / 1000)} s (operation ${id} is still running)`;
    return { state: "running", operationId: id, reason };
  }
  const result = outcome.event.result ?? (await ctx.readResult(id));
  if (outcome.event.status !== "completed") {
    const why = result.stderr.trim() || outcome.event.status;
    return {
      state: "failed",
      operationId: id,
      reason: `route sync on server '${spec.server.name}' ${outcome.event.status}: ${why}`,
    };
  }
  const report = parseReport(result.stdout);
  if (!report) {
    return {
      state: "failed",
      operationId: id,
      reason: `the agent of server '${spec.server.name}' sent an unreadable route report`,
    };
  }
  return { state: "reported", operationId: id, report };
}

const STATUSES = new Set(["synced", "noop", "drift_recovered", "failed"]);

function parseReport(stdout: string): AgentReport | undefined {
  try {
    const r = JSON.parse(stdout) as AgentReport & { version?: number };
    if (r.version !== 1 || !Array.isArray(r.routes) || !Array.isArray(r.removed)) return undefined;
    const ok = r.routes.every(
      (x) => typeof x.application_id === "string" && STATUSES.has(x.status) && Array.isArray(x.fqdns),
    );
    return ok ? { proxy: String(r.proxy), routes: r.routes, removed: r.removed } : undefined;
  } catch {
    return undefined;
  }
}

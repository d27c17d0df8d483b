// The process's Prometheus metrics (prom-client): one registry per process,
// whatever its role, served at /metrics by the api and by the gateway's small
// HTTP listener. Every label takes values from a small fixed set (route
// patterns, operation types, final statuses, error kinds): never an id, a URL,
// a key or anything a caller chose, so the series count stays bounded and
// nothing secret can reach a scrape.
import type { Knex } from "knex";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { isStoreUnavailable } from "../db/unavailable.js";
import { collectProcessMetrics } from "./process-metrics.js";

export const registry = new Registry();
collectProcessMetrics(registry, "relayctl_");

/** Seconds, from a fast HTTP answer to a long command. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const OPERATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

export const httpDuration = new Histogram({
  name: "relayctl_http_request_duration_seconds",
  help: "HTTP requests by method, route pattern and status code",
  labelNames: ["method", "route", "status"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const rateLimitRefusals = new Counter({
  name: "relayctl_rate_limit_refusals_total",
  help: "Requests refused 429 (a key's or a sign-in's rate limit), by route pattern",
  labelNames: ["route"] as const,
  registers: [registry],
});

export const operationsStarted = new Counter({
  name: "relayctl_operations_started_total",
  help: "Operations recorded (row and audit event written), by type",
  labelNames: ["type"] as const,
  registers: [registry],
});

export const operationsFinished = new Counter({
  name: "relayctl_operations_total",
  help: "Operations that reached a final state in this process, by type and final status",
  labelNames: ["type", "status"] as const,
  registers: [registry],
});

export const operationDuration = new Histogram({
  name: "relayctl_operation_duration_seconds",
  help: "Time from an operation's start to its final state, by type and final status",
  labelNames: ["type", "status"] as const,
  buckets: OPERATION_BUCKETS,
  registers: [registry],
});

export const dispatchDuration = new Histogram({
  name: "relayctl_operation_dispatch_seconds",
  help: "Time to hand a job to the gateway holding the agent (until its ack; sent: published for a caller that waits, answered only if refused), by outcome",
  labelNames: ["outcome"] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const completionDuration = new Histogram({
  name: "relayctl_operation_completion_seconds",
  help: "Time to store an operation's final state with its audit event and announce it",
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const auditCommits = new Counter({
  name: "relayctl_audit_commits_total",
  help: "Batches of audited writes committed by this process: guessed (one round trip on a guessed chain head), stale (a guess that missed, rolled back before the locking way), locking (the chain head locked and read first)",
  labelNames: ["way"] as const,
  registers: [registry],
});

export const keyAdmissions = new Counter({
  name: "relayctl_automation_key_admissions_total",
  help: "Automation-key requests admitted by this api: full (counted and the key read in a round trip of their own), on_row (on the key's row cached in this window, counted by their operation's start), refused_on_start (counted on the row, their start's guard refused: admitted the full way after)",
  labelNames: ["way"] as const,
  registers: [registry],
});

export const natsErrors = new Counter({
  name: "relayctl_nats_errors_total",
  help: "NATS trouble seen by this process: disconnect, error, publish (failed publish), unavailable (a dispatch or wait refused while NATS was unreachable)",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const dbErrors = new Counter({
  name: "relayctl_db_errors_total",
  help: "Database failures: connect (a connection attempt failed), unavailable (a query failed for want of the database) or query (any other failed query)",
  labelNames: ["kind"] as const,
  registers: [registry],
});

/** The gateway's held agent streams, read at scrape time. */
export function observeAgentsConnected(count: () => number): void {
  registry.removeSingleMetric("relayctl_gateway_agents_connected");
  new Gauge({
    name: "relayctl_gateway_agents_connected",
    help: "Agents holding a stream to this gateway",
    registers: [registry],
    collect() {
      this.set(count());
    },
  });
}

/** The gateway's agents' handshakes (gateway/handshake-gate.ts), read at scrape time. */
export function observeHandshakes(gate: { inProgress: number; waiting: number; abandoned: number }): void {
  registry.removeSingleMetric("relayctl_gateway_handshakes");
  registry.removeSingleMetric("relayctl_gateway_handshakes_abandoned_total");
  new Gauge({
    name: "relayctl_gateway_handshakes",
    help: "Agents' connections whose handshake is under way (in_progress) or waiting for a slot (waiting; some may have closed since)",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      this.set({ state: "in_progress" }, gate.inProgress);
      this.set({ state: "waiting" }, gate.waiting);
    },
  });
  new Counter({
    name: "relayctl_gateway_handshakes_abandoned_total",
    help: "Agents' connections that closed while they waited for a handshake slot (an agent that gave up on its Welcome)",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(gate.abandoned);
    },
  });
}

/** Counts the database's failed connection attempts (the pool's) and failed queries (knex's `query-error`). */
export function countDbErrors(db: Knex): void {
  // A connection that cannot be made fails before any query starts: the pool sees it, knex's event does not.
  const pool = (db.client as { pool?: { on(event: "createFail", f: () => void): void } }).pool;
  pool?.on("createFail", () => dbErrors.inc({ kind: "connect" }));
  db.on("query-error", (err: unknown) =>
    dbErrors.inc({ kind: isStoreUnavailable(err) ? "unavailable" : "query" }),
  );
}

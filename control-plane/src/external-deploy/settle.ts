// A sync's outcome on one server, settled: from the agent's report (or the
// operation's failure), each entry's result or error, the claims to give back
// and the audit event of the server's entries. That event holds what each entry
// asked and what it became (its signature, hostnames and port), as the agent's
// route ledger does, which decides noop and drift; application_route_state keeps
// only the conflict guard's columns. One pure function makes the outcome for both
// of the processes that may store it:
//
//   the gateway  with the operation's completion, in its commit: the plan rides
//                with the job (JobHint.settle) and syncSettler reads it, so the
//                sync's answer waits for no commit after the completion's;
//   the api      itself, in the sync's last commit, when the completion did not
//                (a gateway that was not told the plan, a completion made
//                elsewhere: the sweeper, an agent that was not connected) or
//                when the api stopped waiting first (its entries then say the
//                agent did not report in time; a completion that comes later
//                still settles, so the trail holds both, in that order).
//
// The done event says which (`settled`); the api answers from the same function
// either way, so its answer and what was stored agree.
import type { Knex } from "knex";
import type { AuditEventInput, Write } from "../audit/audit-log.js";
import type { Settler } from "../operations/finish.js";
import { type Claim, releaseWrites } from "./conflict-guard.js";
import { type RouteJobOutcome, finishedOutcome } from "./route-job.js";

export interface SyncResult {
  application_id: string;
  container_name: string;
  status: "synced" | "noop" | "conflict" | "drift_recovered";
  signature_hash: string;
  synced_fqdns: string[];
  reason?: string;
}

export interface SyncError {
  container_name: string;
  reason: string;
  application_id?: string;
}

/** An entry of the request as the audit records it (what was asked). */
export interface AskedEntry {
  container_name: string;
  container_port?: number;
  image_tag?: string;
  force?: boolean;
}

/** One claimed entry the job carries: what the settlement needs of it. */
export interface PlanEntry {
  /** The entry's place in the request: the audit lists entries in request order. */
  rank: number;
  application_id: string;
  container_name: string;
  container_port: number;
  image_tag: string;
  force: boolean;
  claim: Claim;
}

/** One line of a sync's audit event: the entry as asked and its outcome. */
export type AuditLine = Record<string, unknown> & { rank?: number };

/** What one server's job settles: the session's facts, its claimed entries, the lines decided before the job. */
export interface SyncPlan {
  session_id: string;
  key_id: string | null;
  workflow_run_id: string | null;
  commit_sha: string | null;
  ip: string;
  server_id: string;
  server_name: string;
  entries: PlanEntry[];
  /** The server's entries refused or in conflict before the job, as audit lines with their rank. */
  decided: AuditLine[];
}

export interface Settled {
  results: SyncResult[];
  errors: SyncError[];
  release: Claim[];
}

/** The claimed entries' outcomes: results and errors, and the claims to give back. */
export function settleEntries(entries: PlanEntry[], outcome: RouteJobOutcome): Settled {
  const out: Settled = { results: [], errors: [], release: [] };
  if (outcome.state !== "reported") {
    for (const e of entries) {
      out.errors.push({
        container_name: e.container_name,
        application_id: e.application_id,
        reason: outcome.reason,
      });
      out.release.push(e.claim);
    }
    return out;
  }
  const reported = new Map(outcome.report.routes.map((r) => [r.application_id, r]));
  for (const e of entries) {
    const r = reported.get(e.application_id);
    if (!r || r.status === "failed") {
      const reason = r?.error
        ? `the agent refused the route: ${r.error}`
        : "the agent did not report this route";
      out.errors.push({ container_name: e.container_name, application_id: e.application_id, reason });
      out.release.push(e.claim);
      continue;
    }
    out.results.push({
      application_id: e.application_id,
      container_name: e.container_name,
      status: r.status,
      signature_hash: r.signature_hash,
      synced_fqdns: r.fqdns,
    });
  }
  return out;
}

/** An entry's audit line: as asked, with its outcome. */
export function auditLine(
  asked: AskedEntry | undefined,
  o: (SyncResult | SyncError) & { container_name: string },
  rank: number,
): AuditLine {
  const r = o as Partial<SyncResult> & Partial<SyncError>;
  // The keys in code-unit order (a field a result or an error does not have is
  // undefined, and dropped): its canonical JSON is then one JSON.stringify (audit-log.ts).
  return {
    rank,
    application_id: r.application_id,
    container_name: o.container_name,
    container_port: asked?.container_port,
    force: asked?.force === true,
    image_tag: asked?.image_tag,
    outcome: r.status ?? "error",
    reason: r.reason,
    signature_hash: r.signature_hash,
    status: r.status,
    synced_fqdns: r.synced_fqdns,
  };
}

/** The session's facts every audit event of a sync states once. */
export type SessionFacts = Pick<SyncPlan, "session_id" | "key_id" | "workflow_run_id" | "commit_sha" | "ip">;

/**
 * One audit event for the entries of one server (serverId null: the entries that
 * reached none), in request order; operationId: the job that carried them.
 */
export function syncEvent(
  tenantId: string,
  facts: SessionFacts,
  serverId: string | null,
  operationId: string | null,
  lines: AuditLine[],
): AuditEventInput {
  const entries = [...lines]
    .sort((a, b) => (a.rank ?? 0) - (b.rank ?? 0))
    .map(({ rank: _rank, ...line }) => line);
  return {
    tenantId,
    eventType: "external_deploy.sync",
    keyId: facts.key_id,
    serverId,
    operationId,
    runId: facts.workflow_run_id,
    payload: {
      commit_sha: facts.commit_sha,
      entries,
      ip: facts.ip,
      operation_id: operationId,
      server_id: serverId,
      session_id: facts.session_id,
      workflow_run_id: facts.workflow_run_id,
    },
  };
}

/** A server's settlement: its entries' outcomes and audit event, and the writes that store them. */
export function settleServer(tenantId: string, plan: SyncPlan, outcome: RouteJobOutcome) {
  const settled = settleEntries(plan.entries, outcome);
  const asked = new Map(plan.entries.map((e) => [e.application_id, e]));
  const lines = [
    ...plan.decided,
    ...[...settled.results, ...settled.errors].map((o) => {
      const e = asked.get(o.application_id!)!;
      return auditLine(e, o, e.rank);
    }),
  ];
  const event = syncEvent(tenantId, plan, plan.server_id, outcome.operationId, lines);
  const writes = (q: Knex | Knex.Transaction): Write[] => releaseWrites(q, plan.session_id, settled.release);
  return { ...settled, event, writes };
}

const isStr = (v: unknown): v is string => typeof v === "string";
const strOrNull = (v: unknown) => v === null || isStr(v);

/** The plan as the job's hint carried it, when it has the shape settleServer needs. */
function planOf(v: unknown, serverId: string): SyncPlan | undefined {
  const p = v as Partial<SyncPlan> | null;
  if (!p || typeof p !== "object") return undefined;
  const ok =
    isStr(p.session_id) &&
    strOrNull(p.key_id) &&
    strOrNull(p.workflow_run_id) &&
    strOrNull(p.commit_sha) &&
    isStr(p.ip) &&
    p.server_id === serverId &&
    isStr(p.server_name) &&
    Array.isArray(p.decided) &&
    Array.isArray(p.entries) &&
    p.entries.every(
      (e) =>
        e &&
        Number.isSafeInteger(e.rank) &&
        isStr(e.application_id) &&
        isStr(e.container_name) &&
        Number.isSafeInteger(e.container_port) &&
        isStr(e.image_tag) &&
        typeof e.force === "boolean" &&
        e.claim?.applicationId === e.application_id &&
        Number.isSafeInteger(e.claim.claimedAt),
    );
  return ok ? (p as SyncPlan) : undefined;
}

/**
 * The gateway's side (OperationService.onSettle("route_sync")): a sync's plan,
 * settled with the operation's completion. Undefined for a route_sync that
 * carries no plan of this shape (deletions, live routes, another version's).
 */
export const syncSettler: Settler = ({ operationId, tenantId, serverId, plan, result }) => {
  const p = planOf(plan, serverId);
  if (!p) return undefined;
  const outcome = finishedOutcome(operationId, p.server_name, result.status, result.stderr, result.detail);
  const { event, writes } = settleServer(tenantId, p, outcome);
  return { events: [event], writes };
};

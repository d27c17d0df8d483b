// A sync's claims on one server's applications (conflict-guard.ts) and the
// route_sync operation that carries them, committed together: one audited
// commit (audit/group-commit.ts) instead of a transaction of the guard's own and
// then the operation's. Nothing runs unaudited: the operation's row and its
// audit event are in that commit, before the job is dispatched. When every
// candidate conflicts nothing is started (no row, no event: the sync's own
// per-entry events say why).
//
// Two ways, one verdict:
//   known    the verdicts made on the state rows as read before (readStates),
//            sent in ONE round trip on a guessed chain head; the claims' UPDATE
//            must find every row still as read, or nothing commits and the
//            batch is decided again the locking way;
//   locking  the state rows read FOR UPDATE beside the chain head's lock, the
//            verdicts made on them, then the writes and COMMIT.
// A guess that saw a conflict, or a row it had to make, goes the locking way at
// once: a refusal is only ever given from locked rows.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { AuditEventInput } from "../audit/audit-log.js";
import {
  type BulkKind,
  type WriteOutcome,
  chainHeadGuess,
  commitAuditedBulk,
} from "../audit/group-commit.js";
import { type Statement, insertRows } from "../db/statement.js";
import { isStoreUnavailable } from "../db/unavailable.js";
import { RcError } from "../errors.js";
import { operationsStarted } from "../observability/metrics.js";
import type { ServerRef, StartedOperation } from "../operations/outcome.js";
import { OPERATION_COLUMNS } from "../operations/store.js";
import {
  type Candidate,
  type Claim,
  type GuardVerdict,
  type StateRow,
  claimWrite,
  claimWriteKnown,
  judge,
  lockStates,
  statesOf,
} from "./conflict-guard.js";

export interface ClaimStartSpec {
  tenantId: string;
  sessionId: string;
  server: ServerRef;
  keyId: string | null;
  runId: string | null;
  /** The operation's lease and hard deadline (OperationService.leaseMs, the route job's deadline). */
  leaseMs: number;
  deadlineSeconds: number;
  candidates: Candidate[];
  /** The operation's audit fields, given the claims that passed (the routes it carries). */
  audit: (claimed: Set<string>) => Record<string, unknown>;
  /** The candidates' rows as read before (readStates): the known way's guess. */
  seen: Map<string, StateRow>;
}

export interface ClaimStartOutcome {
  verdicts: Map<string, GuardVerdict>;
  /** The started operation; undefined when every candidate conflicted. */
  op?: StartedOperation;
}

interface Item {
  spec: ClaimStartSpec;
  id: string;
  startedAt: number;
}

type Value = { verdicts: Map<string, GuardVerdict>; started: boolean };

/** The operation's row and its start event, as createOperation makes them for `route_sync`. */
function operationOf(item: Item, claims: Claim[]): { row: Statement; event: AuditEventInput } {
  const { spec, id, startedAt } = item;
  const row = {
    id,
    tenant_id: spec.tenantId,
    server_id: spec.server.id,
    operation_type: "route_sync",
    status: "running",
    delivery: "pending",
    key_id: spec.keyId,
    run_id: spec.runId,
    lease_expires_at: startedAt + spec.leaseMs,
    deadline_at: startedAt + spec.deadlineSeconds * 1000,
    pre_boot_id: null,
    started_at: startedAt,
  };
  const claimed = new Set(claims.map((c) => c.applicationId));
  const event: AuditEventInput = {
    tenantId: spec.tenantId,
    eventType: "operation.route_sync",
    operationId: id,
    keyId: spec.keyId,
    serverId: spec.server.id,
    runId: spec.runId,
    payload: {
      operation_id: id,
      ...spec.audit(claimed),
      server_id: spec.server.id,
      server_name: spec.server.name,
    },
  };
  return { row: insertRows("operations", OPERATION_COLUMNS, [row]), event };
}

/** The items' candidates, in batch order. */
const idsOf = (items: Item[]) => [
  ...new Set(items.flatMap((i) => i.spec.candidates.map((c) => c.applicationId))),
];

/** The locking way: verdicts on the locked rows, item after item (a later one sees the claims before it). */
const planLocked: BulkKind<Item, Value>["plan"] = (_db, items, rows) => {
  const states = statesOf(rows);
  const now = Date.now();
  const writes: Statement[] = [];
  const outcomes = items.map((item): WriteOutcome<Value> => {
    const { verdicts, claims } = judge(item.spec.sessionId, item.spec.candidates, states, now);
    if (claims.length === 0) return { event: null, value: { verdicts, started: false } };
    const { row, event } = operationOf(item, claims);
    writes.push(claimWrite(item.spec.sessionId, claims), row);
    return { event, value: { verdicts, started: true } };
  });
  return { outcomes, writes };
};

const claimStartLocked: BulkKind<Item, Value> = {
  read: (db, items) => lockStates(db, idsOf(items)),
  plan: planLocked,
};

/** As claimStartLocked, and on a guessed head with the rows as read before (every candidate claimed). */
const claimStartKnown: BulkKind<Item, Value> = {
  read: claimStartLocked.read,
  plan: planLocked,
  planKnown: (_db, items) => {
    const writes: { write: Statement; rows: number }[] = [];
    const outcomes = items.map((item): WriteOutcome<Value> => {
      const seen = new Map(item.spec.seen);
      const { verdicts, claims } = judge(item.spec.sessionId, item.spec.candidates, seen, item.startedAt);
      const { row, event } = operationOf(item, claims);
      writes.push({ write: claimWriteKnown(item.spec.sessionId, claims), rows: claims.length });
      writes.push({ write: row, rows: 1 });
      return { event, value: { verdicts, started: true } };
    });
    return { outcomes, writes };
  },
};

/** Whether the rows as read let every candidate be claimed (else only locked rows decide). */
function allFree(spec: ClaimStartSpec, now: number): boolean {
  if (spec.candidates.some((c) => !spec.seen.has(c.applicationId))) return false;
  const { claims } = judge(spec.sessionId, spec.candidates, new Map(spec.seen), now);
  return claims.length === new Set(spec.candidates.map((c) => c.applicationId)).size;
}

/**
 * Claims what it can of `spec.candidates` and, when anything was claimed,
 * starts the route_sync operation carrying those claims, in one commit.
 * Fail closed as OperationService.start: RC_ERR_STORE_UNAVAILABLE (503) when
 * the database cannot be reached, nothing claimed and nothing started.
 */
export async function claimAndStart(db: Knex, spec: ClaimStartSpec): Promise<ClaimStartOutcome> {
  const startedAt = Date.now();
  const item: Item = { spec, id: randomUUID(), startedAt };
  const kind = allFree(spec, startedAt) ? claimStartKnown : claimStartLocked;
  let value: Value;
  try {
    value = await commitAuditedBulk(db, spec.tenantId, kind, item);
  } catch (err) {
    if (isStoreUnavailable(err)) throw new RcError("RC_ERR_STORE_UNAVAILABLE", undefined, { cause: err });
    throw err;
  }
  if (!value.started) return { verdicts: value.verdicts };
  operationsStarted.inc({ type: "route_sync" });
  // What OperationService.start tells the gateway with the job: its completion may commit in one round trip.
  const head = chainHeadGuess(db, spec.tenantId);
  const hint = head && { ...head, operationType: "route_sync", startedAt, runId: spec.runId };
  return {
    verdicts: value.verdicts,
    op: { id: item.id, server: spec.server, startedAt, tenantId: spec.tenantId, hint },
  };
}

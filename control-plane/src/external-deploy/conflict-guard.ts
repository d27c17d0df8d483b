// The 30-second conflict guard (contract "Conflict guard"): an application synced
// by one session cannot be synced by another session for 30 s unless the entry
// says `force`. The claims are written in the transaction that starts the
// route_sync operation carrying them (claim-start.ts), decided either under the
// state rows' locks or on a read made before, whose every row the claim's UPDATE
// must then find unchanged (or nothing of that transaction commits and it is
// decided again under the locks). So two sessions racing for one application
// cannot both pass; a claim whose sync did not happen is given back.
import type { Knex } from "knex";
import { type Statement, isMysql, placeholders } from "../db/statement.js";
import { iso } from "../lib/time.js";

export const GUARD_MS = 30_000;

/** What the guard reads of an application's route state. */
export interface StateRow {
  application_id: string;
  last_session_id: string | null;
  last_synced_at: number | null;
}

export interface Candidate {
  applicationId: string;
  applicationName: string;
  force: boolean;
}

export interface Claim {
  applicationId: string;
  previous: { last_session_id: string | null; last_synced_at: number | null };
  claimedAt: number;
}

export type GuardVerdict = { claimed: Claim } | { conflict: string };

const COLUMNS = "`application_id`, `last_session_id`, `last_synced_at`";

const normal = (r: StateRow): StateRow => ({
  application_id: r.application_id,
  last_session_id: r.last_session_id ?? null,
  last_synced_at:
    r.last_synced_at === null || r.last_synced_at === undefined ? null : Number(r.last_synced_at),
});

/**
 * The candidates' state rows as committed now, without locks: the guess a claim
 * is first tried on. Rows that do not exist yet are inserted empty first (an
 * application's first sync), so the claim's UPDATE has a row to find and lock.
 */
export async function readStates(db: Knex, ids: string[]): Promise<Map<string, StateRow>> {
  const out = new Map<string, StateRow>();
  if (ids.length === 0) return out;
  const rows = await db("application_route_state")
    .whereIn("application_id", ids)
    .select<StateRow[]>("application_id", "last_session_id", "last_synced_at");
  for (const r of rows) out.set(r.application_id, normal(r));
  const missing = ids.filter((id) => !out.has(id));
  if (missing.length > 0) {
    await db("application_route_state")
      .insert(missing.map((application_id) => ({ application_id })))
      .onConflict("application_id")
      .ignore();
    // Empty as inserted: if another sync made or claimed the row meanwhile, the claim's UPDATE
    // does not find it so, and the claim is decided again under the row's lock.
    for (const id of missing)
      out.set(id, { application_id: id, last_session_id: null, last_synced_at: null });
  }
  return out;
}

/** The candidates' state rows, locked until the commit (the locking way of claim-start.ts). */
export function lockStates(db: Knex, ids: string[]): Statement {
  const lock = isMysql(db) ? " FOR UPDATE" : "";
  return {
    sql: `SELECT ${COLUMNS} FROM \`application_route_state\` WHERE \`application_id\` IN (${placeholders(ids.length)})${lock}`,
    bindings: ids,
  };
}

/** The rows a locking read returned, by application. */
export function statesOf(rows: unknown[]): Map<string, StateRow> {
  return new Map((rows as StateRow[]).map((r) => [r.application_id, normal(r)]));
}

/**
 * The verdict on each candidate of `sessionId` against `states`, which it
 * updates with the claims (so a later session judged on the same map, in the
 * same transaction, sees them). An application without a row is free.
 */
export function judge(
  sessionId: string,
  candidates: Candidate[],
  states: Map<string, StateRow>,
  now: number,
): { verdicts: Map<string, GuardVerdict>; claims: Claim[] } {
  const verdicts = new Map<string, GuardVerdict>();
  const claims: Claim[] = [];
  for (const c of candidates) {
    if (verdicts.has(c.applicationId)) continue;
    const s = states.get(c.applicationId);
    const last = s?.last_synced_at ?? null;
    const held =
      s?.last_session_id && s.last_session_id !== sessionId && last !== null && now - last < GUARD_MS;
    if (held && !c.force) {
      verdicts.set(c.applicationId, {
        conflict: conflictReason(c.applicationName, s!.last_session_id!, last!, now),
      });
      continue;
    }
    const claim: Claim = {
      applicationId: c.applicationId,
      previous: { last_session_id: s?.last_session_id ?? null, last_synced_at: last },
      claimedAt: now,
    };
    verdicts.set(c.applicationId, { claimed: claim });
    claims.push(claim);
    states.set(c.applicationId, {
      application_id: c.applicationId,
      last_session_id: sessionId,
      last_synced_at: now,
    });
  }
  return { verdicts, claims };
}

/** The claims' one UPDATE, on rows the transaction holds locked. */
export function claimWrite(sessionId: string, claims: Claim[]): Statement {
  const ids = claims.map((c) => c.applicationId);
  return {
    sql: `UPDATE \`application_route_state\` SET \`last_session_id\` = ?, \`last_synced_at\` = ? WHERE \`application_id\` IN (${placeholders(ids.length)})`,
    bindings: [sessionId, claims[0]!.claimedAt, ...ids],
  };
}

/**
 * The claims' one UPDATE on rows read before without a lock: it moves a row only
 * while it still holds what the verdict was made from, so it must move exactly
 * `claims.length` rows (the caller makes the transaction stop otherwise).
 */
export function claimWriteKnown(sessionId: string, claims: Claim[]): Statement {
  const ids = claims.map((c) => c.applicationId);
  const tuples = claims.flatMap((c) => [
    c.applicationId,
    c.previous.last_session_id ?? "",
    c.previous.last_synced_at ?? -1,
  ]);
  const tuple = "(?, ?, ?)";
  return {
    sql: `UPDATE \`application_route_state\` SET \`last_session_id\` = ?, \`last_synced_at\` = ? WHERE \`application_id\` IN (${placeholders(ids.length)}) AND (\`application_id\`, COALESCE(\`last_session_id\`, ''), COALESCE(\`last_synced_at\`, -1)) IN (${claims.map(() => tuple).join(", ")})`,
    bindings: [sessionId, claims[0]!.claimedAt, ...ids, ...tuples],
  };
}

function conflictReason(name: string, otherSession: string, at: number, now: number): string {
  const ago = ((now - at) / 1000).toFixed(1);
  return `application '${name}' was synced by session ${otherSession} at ${iso(at)} (${ago} s ago); the 30 s conflict guard blocks other sessions until ${iso(at + GUARD_MS)}: retry then, or set force: true`;
}

/**
 * The updates that give claims back whose sync did not happen (agent not
 * connected, proxy refused), for the caller to send in its transaction.
 */
export function releaseWrites(
  db: Knex | Knex.Transaction,
  sessionId: string,
  claims: Claim[],
): Knex.QueryBuilder[] {
  return claims.map((c) =>
    db("application_route_state")
      .where({ application_id: c.applicationId, last_session_id: sessionId, last_synced_at: c.claimedAt })
      .update(c.previous),
  );
}

// The 30-second conflict guard (contract "Conflict guard"): an application synced
// by one session cannot be synced by another session for 30 s unless the entry
// says `force`. Claims are taken under row locks, so two sessions racing for one
// application cannot both pass; a claim whose sync did not happen is given back.
import type { Knex } from "knex";
import { compiled, isMysql } from "../db/statement.js";
import { iso } from "../lib/time.js";

export const GUARD_MS = 30_000;

interface StateRow {
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

/** Claims every candidate it can for `sessionId`; the others get a conflict reason. */
export async function claimApplications(
  db: Knex,
  sessionId: string,
  candidates: Candidate[],
): Promise<Map<string, GuardVerdict>> {
  const ids = [...new Set(candidates.map((c) => c.applicationId))];
  const verdicts = new Map<string, GuardVerdict>();
  if (ids.length === 0) return verdicts;
  await db.transaction(async (trx) => {
    const rows = await lockStates(trx, ids);
    const byId = new Map(rows.map((r) => [r.application_id, r]));
    const now = Date.now();
    const claimed: string[] = [];
    for (const c of candidates) {
      if (verdicts.has(c.applicationId)) continue;
      const s = byId.get(c.applicationId);
      const last =
        s?.last_synced_at === null || s?.last_synced_at === undefined ? null : Number(s.last_synced_at);
      const held =
        s?.last_session_id && s.last_session_id !== sessionId && last !== null && now - last < GUARD_MS;
      if (held && !c.force) {
        verdicts.set(c.applicationId, {
          conflict: conflictReason(c.applicationName, s!.last_session_id!, last!, now),
        });
        continue;
      }
      verdicts.set(c.applicationId, {
        claimed: {
          applicationId: c.applicationId,
          previous: { last_session_id: s?.last_session_id ?? null, last_synced_at: last },
          claimedAt: now,
        },
      });
      claimed.push(c.applicationId);
    }
    // One statement for every claim: a sync of 100 applications is one round trip, not 100.
    if (claimed.length > 0) {
      await trx("application_route_state")
        .whereIn("application_id", claimed)
        .update({ last_session_id: sessionId, last_synced_at: now });
    }
  });
  return verdicts;
}

/**
 * Every candidate's state row, created when missing, then locked for the
 * transaction: the two statements in one round trip on MySQL (multi-statement).
 */
async function lockStates(trx: Knex.Transaction, ids: string[]): Promise<StateRow[]> {
  const insert = trx("application_route_state")
    .insert(ids.map((application_id) => ({ application_id })))
    .onConflict("application_id")
    .ignore();
  const select = trx("application_route_state")
    .whereIn("application_id", ids)
    .forUpdate()
    .select<StateRow[]>("application_id", "last_session_id", "last_synced_at");
  if (!isMysql(trx)) {
    await insert;
    return select;
  }
  const a = compiled(insert);
  const b = compiled(select);
  const [results] = await trx.raw(`${a.sql};\n${b.sql}`, [...a.bindings, ...b.bindings] as Knex.RawBinding[]);
  return (results as [unknown, StateRow[]])[1];
}

function conflictReason(name: string, otherSession: string, at: number, now: number): string {
  const ago = ((now - at) / 1000).toFixed(1);
  return `application '${name}' was synced by session ${otherSession} at ${iso(at)} (${ago} s ago); the 30 s conflict guard blocks other sessions until ${iso(at + GUARD_MS)}: retry then, or set force: true`;
}

/**
 * The updates that give claims back whose sync did not happen (agent not
 * connected, proxy refused), for the caller to send in its transaction.
 */
export function releaseWrites(db: Knex, sessionId: string, claims: Claim[]): Knex.QueryBuilder[] {
  return claims.map((c) =>
    db("application_route_state")
      .where({ application_id: c.applicationId, last_session_id: sessionId, last_synced_at: c.claimedAt })
      .update(c.previous),
  );
}

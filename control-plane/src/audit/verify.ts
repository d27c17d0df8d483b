// Walks each tenant's audit chain and reports the first problem found:
// - an event whose hash does not match its contents (HMAC with the chain key;
//   plain SHA-256 only for the events written before the chain was keyed,
//   which may only open the chain), a link to the wrong previous event, a gap
//   in the sequence, or a chain head that points elsewhere;
// - a finished operation whose stored result no longer matches the
//   result_hash of its `operation.completed` event, or that finished with no
//   such event although it started on the keyed chain;
// - a signed checkpoint (checkpoint.ts) the chain no longer contains.
import type { Knex } from "knex";
import { type ChainedFields, KEYED, eventHash } from "./audit-log.js";
import type { AuditKeys } from "./chain-key.js";
import { resultHash } from "./result-hash.js";

export type ChainReport =
  | {
      tenant_id: string;
      ok: true;
      events: number;
      head: string | null;
      /** Events chained with plain SHA-256 before the chain was keyed (migration 007). */
      legacy_events: number;
      /** Operations whose stored result was checked against their completion event. */
      results_checked: number;
    }
  | {
      tenant_id: string;
      ok: false;
      events_checked: number;
      seq: number;
      problem: string;
      operation_id?: string;
    };

interface EventRow extends ChainedFields {
  prev_hash: string | null;
  hash: string;
  hash_alg: string;
}

type Broken = Extract<ChainReport, { ok: false }>;

const PAGE = 1000;
/** Stored results read at once (each up to 2 MiB of output). */
const RESULT_BATCH = 16;

export async function verifyTenantChain(db: Knex, tenantId: string, keys: AuditKeys): Promise<ChainReport> {
  let prev: string | null = null;
  let expectedSeq = 1;
  let legacy = 0;
  let keyed = false;
  let resultsChecked = 0;
  for (;;) {
    const rows: EventRow[] = await db("audit_events")
      .where({ tenant_id: tenantId })
      .andWhere("seq", ">=", expectedSeq)
      .orderBy("seq")
      .limit(PAGE)
      .select(
        "seq",
        "event_type",
        "operation_id",
        "key_id",
        "server_id",
        "run_id",
        "payload",
        "created_at",
        "prev_hash",
        "hash",
        "hash_alg",
      );
    const completions: { seq: number; operationId: string; resultHash: unknown }[] = [];
    for (const row of rows) {
      const seq = Number(row.seq);
      const broken = (problem: string): Broken => ({
        tenant_id: tenantId,
        ok: false,
        events_checked: expectedSeq - 1,
        seq,
        problem,
      });
      if (seq !== expectedSeq) return broken(`sequence gap: expected event ${expectedSeq}, found ${seq}`);
      if (row.prev_hash !== prev)
        return broken("links to a different previous event (an event was removed or reordered)");
      if (row.hash_alg === KEYED) keyed = true;
      else if (row.hash_alg !== "sha256") return broken(`unknown hash_alg '${row.hash_alg}'`);
      else if (keyed)
        return broken("is not keyed but follows keyed events (an event was rewritten without the chain key)");
      else legacy++;
      const fields: ChainedFields = {
        seq,
        event_type: row.event_type,
        operation_id: row.operation_id,
        key_id: row.key_id,
        server_id: row.server_id,
        run_id: row.run_id,
        payload: row.payload,
        created_at: Number(row.created_at),
      };
      if (eventHash(prev, fields, row.hash_alg === KEYED ? keys.chain : undefined) !== row.hash)
        return broken("contents do not match its hash (the event was edited)");
      if (row.event_type === "operation.completed" && row.operation_id)
        completions.push({
          seq,
          operationId: row.operation_id,
          resultHash: JSON.parse(row.payload).result_hash,
        });
      prev = row.hash;
      expectedSeq++;
    }
    const bad = await checkResults(db, tenantId, completions, expectedSeq - 1);
    if (bad) return bad;
    resultsChecked += completions.length;
    if (rows.length < PAGE) break;
  }
  const end = expectedSeq - 1;
  const head = await db("audit_chain_heads")
    .where({ tenant_id: tenantId })
    .first<{ head: string | null; seq: number }>();
  if (head && (head.head !== prev || Number(head.seq) !== end)) {
    return {
      tenant_id: tenantId,
      ok: false,
      events_checked: end,
      seq: expectedSeq,
      problem: `chain head says event ${head.seq}, the trail ends at ${end} (events were removed from the end)`,
    };
  }
  const unsealed = await finishedWithoutCompletion(db, tenantId);
  if (unsealed) {
    return {
      tenant_id: tenantId,
      ok: false,
      events_checked: end,
      seq: Number(unsealed.seq),
      operation_id: unsealed.id,
      problem: `operation ${unsealed.id} is finished but has no operation.completed event (its result was written behind the service's back)`,
    };
  }
  return {
    tenant_id: tenantId,
    ok: true,
    events: end,
    head: prev,
    legacy_events: legacy,
    results_checked: resultsChecked,
  };
}

/** Compares each operation's stored result with the result_hash of its completion event. */
async function checkResults(
  db: Knex,
  tenantId: string,
  completions: { seq: number; operationId: string; resultHash: unknown }[],
  eventsChecked: number,
): Promise<Broken | undefined> {
  for (let i = 0; i < completions.length; i += RESULT_BATCH) {
    const batch = completions.slice(i, i + RESULT_BATCH);
    const rows: {
      id: string;
      status: string;
      exit_code: number;
      stdout: string;
      stderr: string;
      duration_ms: number;
    }[] = await db("operations")
      .where({ tenant_id: tenantId })
      .whereIn(
        "id",
        batch.map((c) => c.operationId),
      )
      .select("id", "status", "exit_code", "stdout", "stderr", "duration_ms");
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const c of batch) {
      const op = byId.get(c.operationId);
      const stored = op
        ? resultHash({
            status: op.status,
            exit_code: op.exit_code,
            stdout: op.stdout ?? "",
            stderr: op.stderr ?? "",
            duration_ms: op.duration_ms,
          })
        : undefined;
      if (stored !== c.resultHash) {
        return {
          tenant_id: tenantId,
          ok: false,
          events_checked: eventsChecked,
          seq: c.seq,
          operation_id: c.operationId,
          problem: op
            ? `operation ${c.operationId}: the stored result does not match the result_hash of its completion event (the result was edited)`
            : `operation ${c.operationId}: its completion event has no operation row (the row was removed)`,
        };
      }
    }
  }
  return undefined;
}

/**
 * A finished operation that started on the keyed chain must have a completion
 * event (finishOperation writes both in one transaction); operations finished
 * before the chain was keyed have none and are not reported.
 */
async function finishedWithoutCompletion(db: Knex, tenantId: string) {
  return db("operations as o")
    .join("audit_events as start", (j) =>
      j.on("start.operation_id", "=", "o.id").andOn("start.tenant_id", "=", "o.tenant_id"),
    )
    .where({ "o.tenant_id": tenantId, "start.hash_alg": KEYED })
    .whereNot("o.status", "running")
    .whereNot("start.event_type", "operation.completed")
    .whereNotExists((q) =>
      q
        .select(db.raw("1"))
        .from("audit_events as done")
        .whereRaw("done.operation_id = o.id")
        .andWhere("done.event_type", "operation.completed"),
    )
    .first<{ id: string; seq: number } | undefined>("o.id", "start.seq");
}

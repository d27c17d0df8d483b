// Walks each tenant's audit hash chain and reports the first broken link: an
// event whose hash does not match its contents, a link to the wrong previous
// event, a gap in the sequence, or a chain head that points elsewhere.
import type { Knex } from "knex";
import { type ChainedFields, eventHash } from "./audit-log.js";

export type ChainReport =
  | { tenant_id: string; ok: true; events: number; head: string | null }
  | { tenant_id: string; ok: false; events_checked: number; seq: number; problem: string };

interface EventRow extends ChainedFields {
  prev_hash: string | null;
  hash: string;
}

const PAGE = 1000;

export async function verifyTenantChain(db: Knex, tenantId: string): Promise<ChainReport> {
  let prev: string | null = null;
  let expectedSeq = 1;
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
      );
    for (const row of rows) {
      const seq = Number(row.seq);
      const broken = (problem: string): ChainReport => ({
        tenant_id: tenantId,
        ok: false,
        events_checked: expectedSeq - 1,
        seq,
        problem,
      });
      if (seq !== expectedSeq) return broken(`sequence gap: expected event ${expectedSeq}, found ${seq}`);
      if (row.prev_hash !== prev)
        return broken("links to a different previous event (an event was removed or reordered)");
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
      if (eventHash(prev, fields) !== row.hash)
        return broken("contents do not match its hash (the event was edited)");
      prev = row.hash;
      expectedSeq++;
    }
    if (rows.length < PAGE) break;
  }
  const head = await db("audit_chain_heads")
    .where({ tenant_id: tenantId })
    .first<{ head: string | null; seq: number }>();
  if (head && (head.head !== prev || Number(head.seq) !== expectedSeq - 1)) {
    return {
      tenant_id: tenantId,
      ok: false,
      events_checked: expectedSeq - 1,
      seq: expectedSeq,
      problem: `chain head says event ${head.seq}, the trail ends at ${expectedSeq - 1} (events were removed from the end)`,
    };
  }
  return { tenant_id: tenantId, ok: true, events: expectedSeq - 1, head: prev };
}

// forge_deliveries: every verified GitLab/Gitea/Forgejo delivery, recorded
// before it is answered (202) and processed from here, as GitHub's are
// (github/deliveries.ts). (connection, delivery id) is unique, so a redelivery
// records nothing and does nothing. The connection in the URL is the tenant's,
// so every delivery has its tenant from the start. Claimed with a lease: with
// several api instances each is processed by one, and one whose processor died
// is taken up again when its lease runs out.
import { gunzipSync, gzipSync } from "node:zlib";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { CLAIM_MS, MAX_ATTEMPTS, type Outcome } from "../github/deliveries.js";
import { isDuplicate } from "../github/sql.js";

export { MAX_ATTEMPTS, type Outcome };

export interface NewForgeDelivery {
  connectionId: string;
  tenantId: string;
  id: string;
  event: string;
  action: string | null;
  payload: Buffer;
}

export interface ForgeDeliveryRow {
  seq: number;
  connection_id: string;
  tenant_id: string;
  id: string;
  event: string;
  action: string | null;
  payload_gz: Buffer;
  status: string;
  attempts: number;
  outcome: string | null;
  received_at: number;
  processed_at: number | null;
}

export const payloadText = (d: ForgeDeliveryRow) => gunzipSync(d.payload_gz).toString("utf8");

/** True when recorded; false for a redelivery (its id came before). */
export async function recordForgeDelivery(db: Knex, d: NewForgeDelivery): Promise<boolean> {
  try {
    await db("forge_deliveries").insert({
      connection_id: d.connectionId,
      tenant_id: d.tenantId,
      id: d.id,
      event: d.event,
      action: d.action,
      payload_gz: gzipSync(d.payload),
      status: "pending",
      attempts: 0,
      received_at: Date.now(),
    });
    return true;
  } catch (err) {
    if (isDuplicate(err)) return false;
    throw err;
  }
}

/** Claims the oldest delivery waiting (or whose claim ran out); undefined when none. */
export async function claimNextForge(db: Knex): Promise<ForgeDeliveryRow | undefined> {
  for (let tries = 0; tries < 5; tries++) {
    const now = Date.now();
    const next = await db("forge_deliveries")
      .where((q) =>
        q
          .where({ status: "pending" })
          .orWhere((q2) => q2.where({ status: "processing" }).andWhere("claimed_until", "<", now)),
      )
      .orderBy("seq", "asc")
      .first<{ seq: number; status: string; claimed_until: number | null } | undefined>(
        "seq",
        "status",
        "claimed_until",
      );
    if (!next) return undefined;
    const won = await db("forge_deliveries")
      .where({ seq: next.seq, status: next.status })
      .andWhere((q) =>
        next.claimed_until === null
          ? q.whereNull("claimed_until")
          : q.where({ claimed_until: next.claimed_until }),
      )
      .update({ status: "processing", claimed_until: now + CLAIM_MS, attempts: db.raw("attempts + 1") });
    if (won === 1) return db("forge_deliveries").where({ seq: next.seq }).first<ForgeDeliveryRow>();
  }
  return undefined;
}

/** A failed attempt: taken up again after its backoff (2 s, 4 s, 8 s...). */
export async function retryForgeLater(db: Knex, seq: number, attempts: number, outcome: Outcome) {
  await db("forge_deliveries")
    .where({ seq })
    .update({
      status: "processing",
      outcome: JSON.stringify(outcome),
      claimed_until: Date.now() + 1000 * 2 ** Math.min(attempts, 8),
    });
}

/** Records what the delivery did and audits it (`forge.delivery`) in its tenant's chain. */
export async function finishForgeDelivery(
  db: Knex,
  d: ForgeDeliveryRow,
  status: "done" | "failed",
  outcome: Outcome,
): Promise<void> {
  await db.transaction(async (trx) => {
    await trx("forge_deliveries")
      .where({ seq: d.seq })
      .update({ status, outcome: JSON.stringify(outcome), claimed_until: null, processed_at: Date.now() });
    await appendAuditEvent(trx, {
      tenantId: d.tenant_id,
      eventType: "forge.delivery",
      payload: {
        connection_id: d.connection_id,
        delivery_id: d.id,
        event: d.event,
        action: d.action,
        result: outcome.result,
        detail: outcome.detail,
        deployments: outcome.deployments ?? [],
      },
    });
  });
}

export async function listForgeDeliveries(db: Knex, connectionId: string, limit: number, cursor?: number) {
  const q = db("forge_deliveries")
    .where({ connection_id: connectionId })
    .orderBy("seq", "desc")
    .limit(limit + 1)
    .select<Omit<ForgeDeliveryRow, "payload_gz">[]>(
      "seq",
      "id",
      "event",
      "action",
      "status",
      "attempts",
      "outcome",
      "received_at",
      "processed_at",
    );
  if (cursor !== undefined) q.andWhere("seq", "<", cursor);
  const rows = await q;
  const more = rows.length > limit;
  const page = rows.slice(0, limit);
  return {
    deliveries: page.map((r) => ({
      delivery_id: r.id,
      event: r.event,
      action: r.action,
      status: r.status,
      attempts: Number(r.attempts),
      outcome: r.outcome ? (JSON.parse(r.outcome) as Outcome) : null,
      received_at: new Date(Number(r.received_at)).toISOString(),
      processed_at: r.processed_at === null ? null : new Date(Number(r.processed_at)).toISOString(),
    })),
    next_cursor: more ? String(page[page.length - 1]!.seq) : null,
  };
}

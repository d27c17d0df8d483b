// The github_deliveries table: every verified delivery is recorded here before
// it is answered, and the processor works from here. The delivery id
// (X-GitHub-Delivery) is unique, so a redelivery records nothing and causes
// nothing. A delivery is claimed by a conditional UPDATE with a lease, so with
// several api instances each delivery is processed by one at a time, and one
// whose processor died is taken up again when its lease runs out.
import { gunzipSync, gzipSync } from "node:zlib";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { isDuplicate } from "./sql.js";

export interface NewDelivery {
  id: string;
  event: string;
  action: string | null;
  installationId: number | null;
  repositoryId: number | null;
  payload: Buffer;
}

export interface DeliveryRow {
  seq: number;
  id: string;
  event: string;
  action: string | null;
  installation_id: number | null;
  repository_id: number | null;
  tenant_id: string | null;
  payload_gz: Buffer;
  status: string;
  attempts: number;
  outcome: string | null;
  received_at: number;
  processed_at: number | null;
}

/** The delivery's body as GitHub sent it. */
export function payloadText(d: DeliveryRow): string {
  return gunzipSync(d.payload_gz).toString("utf8");
}

/** What a delivery did, shown to its tenant. `result` is a short machine word. */
export interface Outcome {
  result: string;
  detail: string;
  deployments?: { application_id: string; deployment_id: string; commit_sha: string }[];
  skipped?: { application_id: string; reason: string }[];
}

/** How long a claim holds before another processor may take the delivery. */
export const CLAIM_MS = 60_000;
/** A delivery that failed this often is left failed (its outcome says why). */
export const MAX_ATTEMPTS = 5;

/** Records a delivery; false when its id was recorded before (a redelivery). */
export async function recordDelivery(db: Knex, d: NewDelivery): Promise<boolean> {
  try {
    await db("github_deliveries").insert({
      id: d.id,
      event: d.event,
      action: d.action,
      installation_id: d.installationId,
      repository_id: d.repositoryId,
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
export async function claimNext(db: Knex): Promise<DeliveryRow | undefined> {
  for (let tries = 0; tries < 5; tries++) {
    const now = Date.now();
    const next = await db("github_deliveries")
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
    const won = await db("github_deliveries")
      .where({ seq: next.seq, status: next.status })
      .andWhere((q) =>
        next.claimed_until === null
          ? q.whereNull("claimed_until")
          : q.where({ claimed_until: next.claimed_until }),
      )
      .update({ status: "processing", claimed_until: now + CLAIM_MS, attempts: db.raw("attempts + 1") });
    if (won === 1) return db("github_deliveries").where({ seq: next.seq }).first<DeliveryRow>();
  }
  return undefined;
}

/**
 * A failed attempt: left claimed until its backoff ends (2 s, 4 s, 8 s...), then
 * taken up again. Its tenant (when known) sees it waiting, with the error.
 */
export async function retryLater(
  db: Knex,
  seq: number,
  attempts: number,
  outcome: Outcome,
  tenantId: string | null,
): Promise<void> {
  await db("github_deliveries")
    .where({ seq })
    .update({
      status: "processing",
      outcome: JSON.stringify(outcome),
      ...(tenantId ? { tenant_id: tenantId } : {}),
      claimed_until: Date.now() + 1000 * 2 ** Math.min(attempts, 8),
    });
}

export async function finishDelivery(
  db: Knex | Knex.Transaction,
  seq: number,
  status: "done" | "failed",
  outcome: Outcome,
  tenantId: string | null,
): Promise<void> {
  await db("github_deliveries")
    .where({ seq })
    .update({
      status,
      outcome: JSON.stringify(outcome),
      tenant_id: tenantId,
      claimed_until: null,
      processed_at: Date.now(),
    });
}

/** The `github.delivery` audit event: what one delivery did, in its tenant's chain. */
export async function auditDelivery(
  trx: Knex.Transaction,
  tenantId: string,
  d: Pick<DeliveryRow, "id" | "event" | "action" | "installation_id" | "repository_id">,
  outcome: Outcome,
): Promise<void> {
  await appendAuditEvent(trx, {
    tenantId,
    eventType: "github.delivery",
    payload: {
      delivery_id: d.id,
      event: d.event,
      action: d.action,
      installation_id: d.installation_id === null ? null : Number(d.installation_id),
      repository_id: d.repository_id === null ? null : Number(d.repository_id),
      result: outcome.result,
      detail: outcome.detail,
      deployments: outcome.deployments ?? [],
    },
  });
}

/**
 * Deliveries of an installation received before it was bound become its
 * tenant's; those already processed are audited now (the rest are when they finish).
 */
export async function adoptDeliveries(trx: Knex.Transaction, installationId: number, tenantId: string) {
  const done = await trx("github_deliveries")
    .where({ installation_id: installationId })
    .whereNull("tenant_id")
    .whereIn("status", ["done", "failed"])
    .orderBy("seq", "asc")
    .select<Pick<DeliveryRow, "id" | "event" | "action" | "installation_id" | "repository_id" | "outcome">[]>(
      "id",
      "event",
      "action",
      "installation_id",
      "repository_id",
      "outcome",
    );
  for (const d of done)
    await auditDelivery(
      trx,
      tenantId,
      d,
      d.outcome ? (JSON.parse(d.outcome) as Outcome) : { result: "unknown", detail: "" },
    );
  await trx("github_deliveries")
    .where({ installation_id: installationId })
    .whereNull("tenant_id")
    .update({ tenant_id: tenantId });
}

export async function listDeliveries(db: Knex, tenantId: string, limit: number, cursor?: number) {
  const q = db("github_deliveries")
    .where({ tenant_id: tenantId })
    .orderBy("seq", "desc")
    .limit(limit + 1)
    .select<Omit<DeliveryRow, "payload_gz">[]>(
      "seq",
      "id",
      "event",
      "action",
      "installation_id",
      "repository_id",
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
      installation_id: r.installation_id === null ? null : Number(r.installation_id),
      repository_id: r.repository_id === null ? null : Number(r.repository_id),
      status: r.status,
      attempts: Number(r.attempts),
      outcome: r.outcome ? (JSON.parse(r.outcome) as Outcome) : null,
      received_at: new Date(Number(r.received_at)).toISOString(),
      processed_at: r.processed_at === null ? null : new Date(Number(r.processed_at)).toISOString(),
    })),
    next_cursor: more ? String(page[page.length - 1]!.seq) : null,
  };
}

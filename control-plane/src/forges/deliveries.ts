// forge_deliveries: every verified GitLab/Gitea/Forgejo delivery, recorded
// before it is answered (202) and processed from here, as GitHub's are
// (github/deliveries.ts). (connection, delivery id) is unique, so a redelivery
// records nothing and does nothing. The connection in the URL is the tenant's,
// so every delivery has its tenant from the start. Claimed with a lease: with
// several api instances each is processed by one, and one whose processor died
// is taken up again when its lease runs out.
import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { CLAIM_MS, MAX_ATTEMPTS, type Outcome, REPLAY_WINDOW_MS } from "../github/deliveries.js";
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

/** What recording did: a redelivery (its id came before) or a replay (its signed body did) records nothing. */
export type ForgeRecorded = "recorded" | "redelivery" | { replayOf: string };

class Replay extends Error {
  constructor(readonly replayOf: string) {
    super("replay");
  }
}

/**
 * Records a delivery. With `signed` (Gitea and Forgejo sign the body, not the
 * delivery id) the same body under another id within REPLAY_WINDOW_MS is a
 * replay, as for GitHub (github/deliveries.ts): its digest, namespaced by the
 * connection, is kept in the same github_delivery_digests table. GitLab's token
 * does not cover the body, so there a body proves nothing more than the token.
 */
export async function recordForgeDelivery(
  db: Knex,
  d: NewForgeDelivery,
  signed: boolean,
  now = Date.now(),
): Promise<ForgeRecorded> {
  const digest = createHash("sha256").update(`forge\n${d.connectionId}\n`).update(d.payload).digest("hex");
  const since = now - REPLAY_WINDOW_MS;
  try {
    await db.transaction(async (trx) => {
      await trx("forge_deliveries").insert({
        connection_id: d.connectionId,
        tenant_id: d.tenantId,
        id: d.id,
        event: d.event,
        action: d.action,
        payload_gz: gzipSync(d.payload),
        status: "pending",
        attempts: 0,
        received_at: now,
      });
      if (!signed) return;
      const seen = await trx("github_delivery_digests")
        .where({ digest })
        .first<{ delivery_id: string; received_at: number } | undefined>("delivery_id", "received_at");
      if (seen && Number(seen.received_at) >= since) throw new Replay(seen.delivery_id);
      if (seen)
        await trx("github_delivery_digests")
          .where({ digest })
          .update({ delivery_id: d.id, received_at: now });
      else await trx("github_delivery_digests").insert({ digest, delivery_id: d.id, received_at: now });
    });
  } catch (err) {
    if (err instanceof Replay) return { replayOf: err.replayOf };
    if (!isDuplicate(err)) throw err;
    if (await db("forge_deliveries").where({ connection_id: d.connectionId, id: d.id }).first("id"))
      return "redelivery";
    const first = await db("github_delivery_digests")
      .where({ digest })
      .first<{ delivery_id: string }>("delivery_id");
    return { replayOf: first?.delivery_id ?? "" };
  }
  return "recorded";
}

/** A replay: logged and audited (`forge.delivery_replayed`) in the connection's tenant, with the source address. */
export async function recordForgeReplay(
  db: Knex,
  log: { warn(o: object, msg: string): void },
  d: Pick<NewForgeDelivery, "connectionId" | "tenantId" | "id" | "event">,
  replayOf: string,
  ip: string,
): Promise<void> {
  const facts = { connection_id: d.connectionId, delivery_id: d.id, replay_of: replayOf, event: d.event, ip };
  log.warn(facts, "forge webhook: a delivery's signed body replayed under another delivery id; ignored");
  await db.transaction((trx) =>
    appendAuditEvent(trx, { tenantId: d.tenantId, eventType: "forge.delivery_replayed", payload: facts }),
  );
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

// The github_deliveries table: every verified delivery is recorded here before
// it is answered, and the processor works from here. The delivery id
// (X-GitHub-Delivery) is unique, so a redelivery records nothing and causes
// nothing. The signature covers the body only, not the id, so the same body
// under another id within REPLAY_WINDOW_MS is a replay (a captured delivery
// sent again): not recorded, not processed, logged and audited. A delivery is claimed by a conditional UPDATE with a lease, so with
// several api instances each delivery is processed by one at a time, and one
// whose processor died is taken up again when its lease runs out.
import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { pruneRows } from "../db/prune.js";
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
  /** `rollout_id` for a fleet application: its rollout, whose first server's deployment `deployment_id` is. */
  deployments?: { application_id: string; deployment_id: string; commit_sha: string; rollout_id?: string }[];
  /** A fleet application's commit waiting for its running rollout (webhooks/push-queue.ts). */
  queued?: QueuedOutcome[];
  skipped?: { application_id: string; reason: string }[];
}

export interface QueuedOutcome {
  application_id: string;
  commit_sha: string;
  behind_rollout_id: string;
  /** The commit that waited before this one, replaced (never rolled out); null when none. */
  superseded_commit_sha: string | null;
  reason: string;
}

/** How long a claim holds before another processor may take the delivery. */
export const CLAIM_MS = 60_000;
/** A delivery that failed this often is left failed (its outcome says why). */
export const MAX_ATTEMPTS = 5;

/**
 * How long a body's digest is kept to recognise a replay: GitHub lets an App's
 * owner redeliver deliveries of the past 3 days (with their original id, so a
 * redelivery is never taken for a replay); a captured body is most useful
 * to an attacker while it is fresh, and the digests of older ones are pruned.
 */
export const REPLAY_WINDOW_MS = 3 * 24 * 3600 * 1000;

/** What recording a delivery did. */
export type Recorded =
  | { result: "recorded" }
  /** Its id was recorded before: GitHub redelivering it. */
  | { result: "redelivery" }
  /** Its body came within the window under another id, `replayOf`. */
  | { result: "replay"; replayOf: string; digest: string };

class Replay extends Error {
  constructor(readonly replayOf: string) {
    super("replay");
  }
}

/** Records a delivery, unless its id (a redelivery) or, within the window, its body (a replay) came before. */
export async function recordDelivery(db: Knex, d: NewDelivery, now = Date.now()): Promise<Recorded> {
  const digest = createHash("sha256").update(d.payload).digest("hex");
  const since = now - REPLAY_WINDOW_MS;
  try {
    await db.transaction(async (trx) => {
      await trx("github_deliveries").insert({
        id: d.id,
        event: d.event,
        action: d.action,
        installation_id: d.installationId,
        repository_id: d.repositoryId,
        payload_gz: gzipSync(d.payload),
        status: "pending",
        attempts: 0,
        received_at: now,
      });
      const seen = await trx("github_delivery_digests")
        .where({ digest })
        .first<{ delivery_id: string; received_at: number } | undefined>("delivery_id", "received_at");
      if (seen && Number(seen.received_at) >= since) throw new Replay(seen.delivery_id);
      // Unseen, or seen before the window: this delivery is now the body's first.
      if (seen)
        await trx("github_delivery_digests")
          .where({ digest })
          .update({ delivery_id: d.id, received_at: now });
      else await trx("github_delivery_digests").insert({ digest, delivery_id: d.id, received_at: now });
    });
  } catch (err) {
    if (err instanceof Replay) return { result: "replay", replayOf: err.replayOf, digest };
    if (!isDuplicate(err)) throw err;
    if (await db("github_deliveries").where({ id: d.id }).first("id")) return { result: "redelivery" };
    // The same body under two ids at once: the other one's insert of the digest won.
    const first = await db("github_delivery_digests")
      .where({ digest })
      .first<{ delivery_id: string }>("delivery_id");
    return { result: "replay", replayOf: first?.delivery_id ?? "", digest };
  }
  await pruneRows(db("github_delivery_digests").where("received_at", "<", since));
  return { result: "recorded" };
}

/**
 * A replay: logged, and audited in the tenant of its installation when it is
 * bound to one (`github.delivery_replayed`), with the source address.
 */
export async function recordReplay(
  db: Knex,
  log: { warn(o: object, msg: string): void },
  d: Pick<NewDelivery, "id" | "event" | "action" | "installationId">,
  r: { replayOf: string; digest: string },
  ip: string,
): Promise<void> {
  const facts = {
    delivery_id: d.id,
    replay_of: r.replayOf,
    event: d.event,
    action: d.action,
    installation_id: d.installationId,
    body_sha256: r.digest,
    ip,
  };
  log.warn(facts, "github webhook: a delivery's body replayed under another delivery id; ignored");
  if (d.installationId === null) return;
  const inst = await db("github_installations")
    .where({ id: d.installationId })
    .first<{ tenant_id: string | null } | undefined>("tenant_id");
  if (!inst?.tenant_id) return;
  await db.transaction((trx) =>
    appendAuditEvent(trx, {
      tenantId: inst.tenant_id!,
      eventType: "github.delivery_replayed",
      payload: facts,
    }),
  );
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

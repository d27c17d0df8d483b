// Security events of keys in the audit trail: refusals of a known key (revoked,
// expired, out of scope, IP) and rate-limit hits, each at most once per key and
// minute window (a flood of refusals must not become a flood of chained writes
// under the tenant's chain-head lock), and key management. Refusals of an
// unknown key are not recorded: there is no tenant to file them under, and
// recording them would let anyone write into a chain.
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { userActor } from "../accounts/users.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import {
  type WindowCount,
  claimFirstRejection,
  countRefusal,
  countRequest,
  refusedInWindow,
} from "./rate-limit.js";

/** The key a request presented, once it is known (even if it is then refused). */
export interface KeyActor {
  keyId: string;
  keyName: string;
  tenantId: string;
  keyType: "automation_key" | "api_key" | "oauth_token" | "web_session";
  /** The person behind an OAuth access token: the actor, whatever route kind records it. */
  user?: { id: string; email: string; role: string };
}

export function actorPayload(actor: KeyActor, ip: string) {
  if (actor.user) return userActor(actor.user, ip);
  return { actor: { key_id: actor.keyId, key_name: actor.keyName, key_type: actor.keyType }, ip };
}

/** Appends one event; a failure is logged, not raised (the request is refused anyway). */
export async function auditKeyEvent(
  db: Knex,
  log: FastifyBaseLogger,
  actor: KeyActor,
  ip: string,
  eventType: string,
  payload: Record<string, unknown>,
): Promise<void> {
  try {
    await db.transaction((trx) =>
      appendAuditEvent(trx, {
        tenantId: actor.tenantId,
        eventType,
        keyId: actor.keyId,
        payload: { ...actorPayload(actor, ip), ...payload },
      }),
    );
  } catch (err) {
    log.warn({ err, eventType, keyId: actor.keyId }, "audit: could not record security event");
  }
}

export interface RateWindow {
  seconds: number;
  limit: number;
}

const UNIT: Record<number, string> = { 60: "minute", 3600: "hour" };

/**
 * Counts the request in each window (in order) and refuses it with 429 and
 * Retry-After at the first exhausted one. The first refusal of a window is
 * audited as `rate_limit.hit`; later ones only add to the window's counter.
 */
export async function enforceRateLimit(
  db: Knex,
  log: FastifyBaseLogger,
  reply: FastifyReply,
  actor: KeyActor,
  ip: string,
  windows: RateWindow[],
): Promise<void> {
  for (const w of windows) {
    await enforceWindow(db, log, reply, actor, ip, await countRequest(db, actor.keyId, w.seconds, w.limit));
  }
}

/** Nothing when the counted request is within its window's limit; else the audited 429. */
export async function enforceWindow(
  db: Knex,
  log: FastifyBaseLogger,
  reply: FastifyReply,
  actor: KeyActor,
  ip: string,
  r: WindowCount,
): Promise<void> {
  if (r.allowed) return;
  if (await claimFirstRejection(db, actor.keyId, r)) {
    await auditKeyEvent(db, log, actor, ip, "rate_limit.hit", {
      limit: r.limit,
      window_seconds: r.windowSeconds,
      window_start: new Date(r.windowStart).toISOString(),
      count: r.count,
      // of which refused (401/403) before the limit was reached
      refused: await refusedInWindow(db, actor.keyId, r),
    });
  }
  reply.header("retry-after", String(r.retryAfterSeconds));
  throw new RcError(
    "RC_ERR_RATE_LIMITED",
    `rate limit exceeded: ${r.limit} requests per ${UNIT[r.windowSeconds] ?? `${r.windowSeconds} s`} for this key; retry in ${r.retryAfterSeconds} s`,
  );
}

/** The window refusals are counted and audited in (every key has a minute window). */
export const REFUSAL_WINDOW_SECONDS = 60;

/**
 * onError hook: a 401/403 of a key that exists (revoked, expired, out of scope,
 * IP) is counted in the key's minute window; the first of each window becomes
 * an `auth.refused` event of its tenant (later ones are reported as `refused`
 * in the window's rate_limit.hit, which they lead to).
 */
export const auditRefusals =
  (db: Knex) =>
  async (req: FastifyRequest, _reply: FastifyReply, error: Error): Promise<void> => {
    // What is answered: an admission's refusal in the route's error's place (auth/deferred-count.ts).
    const err = req.admissionRefusal ?? error;
    if (!(err instanceof RcError) || (err.status !== 401 && err.status !== 403) || !req.keyActor) return;
    const actor = req.keyActor;
    let first: boolean;
    let windowStart: number;
    try {
      ({ first, windowStart } = await countRefusal(db, actor.keyId, REFUSAL_WINDOW_SECONDS));
    } catch (e) {
      req.log.warn({ err: e, keyId: actor.keyId }, "audit: could not count a refusal");
      return;
    }
    if (!first) return;
    await auditKeyEvent(db, req.log, actor, req.ip, "auth.refused", {
      status: err.status,
      code: err.code,
      detail: err.detail,
      method: req.method,
      path: req.url.split("?")[0],
      window_seconds: REFUSAL_WINDOW_SECONDS,
      window_start: new Date(windowStart).toISOString(),
    });
  };

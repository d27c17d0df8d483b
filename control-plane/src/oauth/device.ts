// Device authorizations (RFC 8628): the device code a client polls with (rdc_,
// stored as SHA-256) and the user code a person types on /device. States:
// pending → approved | denied → consumed (tokens issued once). Polling faster
// than the interval is answered slow_down and the interval grows by 5 s (§3.5);
// the check is a conditional UPDATE on last_polled_at, so it holds across api
// instances and concurrent polls.
import { randomInt, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { AccountsConfig } from "../accounts/config.js";
import { type Role, userActor } from "../accounts/users.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { pruneRows } from "../db/prune.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { OAuthError } from "./errors.js";
import { type TokenResponse, clearExpiredTokens, startFamily } from "./tokens.js";
import { transactionRetrying } from "../db/retry.js";

/** RFC 8628 §6.1: base-20 consonants, no vowels (no words), no look-alikes; 8 characters ≈ 34.5 bits. */
export const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
const USER_CODE_LENGTH = 8;
/** Polls may arrive this much early (network jitter) before they count as too fast. */
const POLL_SLACK_MS = 250;

export interface DeviceRow {
  id: string;
  user_code: string;
  client_id: string;
  scope: string | null;
  status: "pending" | "approved" | "denied" | "consumed";
  user_id: string | null;
  tenant_id: string | null;
  interval_seconds: number;
  last_polled_at: number | null;
  expires_at: number;
}

/** "bcdf-ghjk", "BCDFGHJK", " bcdf ghjk " → "BCDFGHJK"; anything else → null. */
export function normalizeUserCode(input: string): string | null {
  const code = input.toUpperCase().replace(/[\s-]/g, "");
  if (code.length !== USER_CODE_LENGTH) return null;
  for (const c of code) if (!USER_CODE_ALPHABET.includes(c)) return null;
  return code;
}

export const displayUserCode = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

function newUserCode(): string {
  let code = "";
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

export async function createDeviceAuthorization(
  db: Knex,
  cfg: AccountsConfig,
  clientId: string,
  scope: string | null,
  verificationUri: string,
) {
  const deviceCode = mintToken("rdc_");
  const now = Date.now();
  // Expired rows would hold their user codes (unique) forever: clear them as we go.
  await pruneRows(db("oauth_device_authorizations").where("expires_at", "<", now - 3600_000));
  for (let attempt = 0; ; attempt++) {
    const userCode = newUserCode();
    try {
      await db("oauth_device_authorizations").insert({
        id: randomUUID(),
        device_code_hash: sha256Hex(deviceCode),
        user_code: userCode,
        client_id: clientId,
        scope,
        status: "pending",
        interval_seconds: cfg.deviceIntervalSeconds,
        expires_at: now + cfg.deviceCodeTtlSeconds * 1000,
        created_at: now,
      });
      const shown = displayUserCode(userCode);
      return {
        device_code: deviceCode,
        user_code: shown,
        verification_uri: verificationUri,
        verification_uri_complete: `${verificationUri}?user_code=${shown}`,
        expires_in: cfg.deviceCodeTtlSeconds,
        interval: cfg.deviceIntervalSeconds,
      };
    } catch (err) {
      // A user code still held by a live request (1 in 2.5e10): draw again.
      if (attempt >= 3) throw err;
    }
  }
}

/** The pending, unexpired request a user code names. */
export async function findPendingByUserCode(db: Knex, userCode: string): Promise<DeviceRow | undefined> {
  return db("oauth_device_authorizations")
    .where({ user_code: userCode, status: "pending" })
    .where("expires_at", ">", Date.now())
    .first<DeviceRow | undefined>();
}

/** Approves or denies a pending request for `user`; false when it is no longer pending. */
export async function decide(
  db: Knex,
  userCode: string,
  user: { id: string; tenant_id: string; email: string; role: Role },
  approve: boolean,
  ip: string,
): Promise<boolean> {
  return transactionRetrying(db, async (trx) => {
    const row = await trx("oauth_device_authorizations")
      .where({ user_code: userCode, status: "pending" })
      .where("expires_at", ">", Date.now())
      .first<DeviceRow | undefined>();
    if (!row) return false;
    const n = await trx("oauth_device_authorizations")
      .where({ id: row.id, status: "pending" })
      .update({ status: approve ? "approved" : "denied", user_id: user.id, tenant_id: user.tenant_id });
    if (Number(n) !== 1) return false;
    await appendAuditEvent(trx, {
      tenantId: user.tenant_id,
      eventType: approve ? "oauth.device_approved" : "oauth.device_denied",
      keyId: user.id,
      payload: {
        ...userActor(user, ip),
        client_id: row.client_id,
        device_authorization_id: row.id,
      },
    });
    return true;
  });
}

/** grant_type=urn:ietf:params:oauth:grant-type:device_code (RFC 8628 §3.4, §3.5). */
export async function pollDeviceCode(
  db: Knex,
  cfg: AccountsConfig,
  deviceCode: string,
  clientId: string,
): Promise<TokenResponse> {
  const row = deviceCode.startsWith("rdc_")
    ? await db("oauth_device_authorizations")
        .where({ device_code_hash: sha256Hex(deviceCode) })
        .first<DeviceRow | undefined>()
    : undefined;
  if (!row) throw new OAuthError("invalid_grant", "unknown device_code");
  if (row.client_id !== clientId)
    throw new OAuthError("invalid_grant", "the device_code was issued to another client");
  const now = Date.now();
  if (row.status === "consumed") throw new OAuthError("invalid_grant", "the device_code was already used");
  if (Number(row.expires_at) <= now)
    throw new OAuthError("expired_token", "the device_code has expired: start again");
  if (row.status === "denied") throw new OAuthError("access_denied", "the user denied the request");
  if (row.status === "pending") {
    const intervalMs = Number(row.interval_seconds) * 1000;
    const onTime = await db("oauth_device_authorizations")
      .where({ id: row.id })
      .where((q) =>
        q.whereNull("last_polled_at").orWhere("last_polled_at", "<=", now - intervalMs + POLL_SLACK_MS),
      )
      .update({ last_polled_at: now });
    if (Number(onTime) === 1)
      throw new OAuthError("authorization_pending", "the user has not approved the request yet");
    await db("oauth_device_authorizations")
      .where({ id: row.id })
      .update({ last_polled_at: now, interval_seconds: db.raw("interval_seconds + 5") });
    throw new OAuthError(
      "slow_down",
      `polling too fast: wait ${Number(row.interval_seconds) + 5} s between requests`,
    );
  }
  // approved: consume it once, and issue the first pair of a new family.
  await clearExpiredTokens(db, row.user_id!);
  return transactionRetrying(db, async (trx) => {
    const n = await trx("oauth_device_authorizations")
      .where({ id: row.id, status: "approved" })
      .update({ status: "consumed", last_polled_at: now });
    if (Number(n) !== 1) throw new OAuthError("invalid_grant", "the device_code was already used");
    return startFamily(
      trx,
      cfg,
      { userId: row.user_id!, tenantId: row.tenant_id!, clientId, scope: row.scope, familyId: randomUUID() },
      "device_code",
    );
  });
}

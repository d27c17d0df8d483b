// OAuth tokens: short-lived access tokens (rco_) and refresh tokens (rcr_),
// stored as SHA-256. Every pair from one approval (device or authorization
// code) shares a family. A
// refresh token is used once: the refresh claims it with a conditional UPDATE
// and issues a new pair in the family; a second use of a claimed token (a thief
// or a replay, RFC 6819 §5.2.2.3 / OAuth 2.0 Security BCP §4.14) revokes the
// whole family, so both the thief's and the user's tokens stop at once.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { AccountsConfig } from "../accounts/config.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { pruneRows } from "../db/prune.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { OAuthError } from "./errors.js";
import { transactionRetrying } from "../db/retry.js";

export interface TokenRow {
  id: string;
  family_id: string;
  kind: "access" | "refresh";
  user_id: string;
  tenant_id: string;
  client_id: string;
  scope: string | null;
  expires_at: number;
  used_at: number | null;
  revoked_at: number | null;
}

export interface TokenGrant {
  userId: string;
  tenantId: string;
  clientId: string;
  scope: string | null;
  familyId: string;
}

/** The token endpoint's successful answer (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  refresh_token: string;
  scope?: string;
}

export async function issueTokens(
  trx: Knex.Transaction,
  cfg: AccountsConfig,
  g: TokenGrant,
): Promise<TokenResponse> {
  const now = Date.now();
  const access = mintToken("rco_");
  const refresh = mintToken("rcr_");
  const base = {
    family_id: g.familyId,
    user_id: g.userId,
    tenant_id: g.tenantId,
    client_id: g.clientId,
    scope: g.scope,
    created_at: now,
  };
  await trx("oauth_tokens").insert([
    {
      ...base,
      id: randomUUID(),
      kind: "access",
      token_hash: sha256Hex(access),
      expires_at: now + cfg.accessTokenTtlSeconds * 1000,
    },
    {
      ...base,
      id: randomUUID(),
      kind: "refresh",
      token_hash: sha256Hex(refresh),
      expires_at: now + cfg.refreshTokenTtlSeconds * 1000,
    },
  ]);
  return {
    access_token: access,
    token_type: "Bearer",
    expires_in: cfg.accessTokenTtlSeconds,
    refresh_token: refresh,
    ...(g.scope ? { scope: g.scope } : {}),
  };
}

/**
 * Expired tokens of a user are of no use to anyone (reuse detection only needs
 * spent refresh tokens until they expire): cleared as new ones are issued. Its
 * own statement, outside the issuing transaction: inside, its range locks
 * deadlocked with a concurrent sign-in's inserts of the same user (MariaDB), and a
 * clean-up that loses such a race may simply wait for the next sign-in.
 */
export async function clearExpiredTokens(db: Knex, userId: string): Promise<void> {
  await pruneRows(db("oauth_tokens").where({ user_id: userId }).where("expires_at", "<", Date.now()));
}

/**
 * The first pair of a new family, when a grant (device code or authorization
 * code) is redeemed: audited as a sign-in of `grant`.
 */
export async function startFamily(
  trx: Knex.Transaction,
  cfg: AccountsConfig,
  g: TokenGrant,
  grant: "device_code" | "authorization_code",
): Promise<TokenResponse> {
  const tokens = await issueTokens(trx, cfg, g);
  await appendAuditEvent(trx, {
    tenantId: g.tenantId,
    eventType: "oauth.tokens_issued",
    keyId: g.userId,
    payload: { user_id: g.userId, client_id: g.clientId, family_id: g.familyId, grant },
  });
  return tokens;
}

export function findToken(db: Knex, token: string): Promise<TokenRow | undefined> {
  return db("oauth_tokens")
    .where({ token_hash: sha256Hex(token) })
    .first<TokenRow | undefined>();
}

export async function revokeFamily(trx: Knex | Knex.Transaction, familyId: string): Promise<number> {
  return Number(
    await trx("oauth_tokens")
      .where({ family_id: familyId })
      .whereNull("revoked_at")
      .update({ revoked_at: Date.now() }),
  );
}

/** grant_type=refresh_token (RFC 6749 §6), with rotation and reuse detection. */
export async function refreshTokens(
  db: Knex,
  cfg: AccountsConfig,
  refreshToken: string,
  clientId: string,
  ip: string,
): Promise<TokenResponse> {
  const row = refreshToken.startsWith("rcr_") ? await findToken(db, refreshToken) : undefined;
  if (!row || row.kind !== "refresh") throw new OAuthError("invalid_grant", "unknown refresh token");
  if (row.client_id !== clientId)
    throw new OAuthError("invalid_grant", "the refresh token was issued to another client");
  if (row.revoked_at !== null) throw new OAuthError("invalid_grant", "the refresh token has been revoked");
  if (Number(row.expires_at) <= Date.now())
    throw new OAuthError("invalid_grant", "the refresh token has expired");
  const user = await db("users")
    .where({ id: row.user_id })
    .first<{ disabled_at: number | null } | undefined>("disabled_at");
  if (!user || user.disabled_at !== null)
    throw new OAuthError("invalid_grant", "the user's account is disabled");
  const rotated = await transactionRetrying(db, async (trx) => {
    const claimed = await trx("oauth_tokens")
      .where({ id: row.id })
      .whereNull("used_at")
      .whereNull("revoked_at")
      .update({ used_at: Date.now() });
    if (Number(claimed) === 1) {
      // The access token of the rotated pair stays valid until it expires: a
      // client refreshing early must not break its own requests in flight.
      return issueTokens(trx, cfg, {
        userId: row.user_id,
        tenantId: row.tenant_id,
        clientId: row.client_id,
        scope: row.scope,
        familyId: row.family_id,
      });
    }
    return null;
  });
  if (rotated) return rotated;
  await transactionRetrying(db, async (trx) => {
    const revoked = await revokeFamily(trx, row.family_id);
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: "oauth.refresh_token_reused",
      keyId: row.user_id,
      payload: {
        user_id: row.user_id,
        family_id: row.family_id,
        client_id: row.client_id,
        tokens_revoked: revoked,
        ip,
      },
    });
  });
  throw new OAuthError(
    "invalid_grant",
    "the refresh token was already used: every token of this login is revoked",
  );
}

/**
 * RFC 7009: revokes the token if it is one of ours. A refresh token takes its
 * whole family (the access tokens issued with it) along (§2.1 "SHOULD").
 * Unknown tokens are not an error (§2.2).
 */
export async function revokeToken(db: Knex, token: string, clientId: string, ip: string): Promise<void> {
  const row = await findToken(db, token);
  if (!row || row.client_id !== clientId || row.revoked_at !== null) return;
  await transactionRetrying(db, async (trx) => {
    if (row.kind === "refresh") await revokeFamily(trx, row.family_id);
    else
      await trx("oauth_tokens")
        .where({ id: row.id })
        .whereNull("revoked_at")
        .update({ revoked_at: Date.now() });
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: "oauth.token_revoked",
      keyId: row.user_id,
      payload: { user_id: row.user_id, family_id: row.family_id, kind: row.kind, client_id: clientId, ip },
    });
  });
}

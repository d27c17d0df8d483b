// The authorization code grant with PKCE (RFC 6749 §4.1, RFC 7636, S256 only,
// as OAuth 2.1 and the MCP authorization spec require). An authorization
// request is checked in two steps (RFC 6749 §4.1.2.1): the client and its
// redirect URI first — a failure there is shown to the person, never sent to
// an unverified address — then the rest, whose failures go back to the client.
// Codes (rac_) are stored as SHA-256, live a minute and are used once; a second
// use revokes the tokens the first one got.
import { createHash, randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { AccountsConfig } from "../accounts/config.js";
import { type Role, userActor } from "../accounts/users.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { type OAuthClient, findClient } from "./clients.js";
import { OAuthError, type OAuthErrorCode } from "./errors.js";
import { grantedScope } from "./scopes.js";
import { pruneRows } from "../db/prune.js";
import { type TokenResponse, clearExpiredTokens, revokeFamily, startFamily } from "./tokens.js";
import { transactionRetrying } from "../db/retry.js";

const CODE_TTL_MS = 60_000;
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

export interface AuthorizationRequest {
  client: OAuthClient;
  redirectUri: string;
  state?: string;
  codeChallenge: string;
  scope: string | null;
}

/** An authorization request that cannot be redirected: shown as a page. */
export class UnredirectableError extends Error {}

/** An error to send back to the client's (verified) redirect URI. */
export class RedirectableError extends Error {
  constructor(
    readonly error: OAuthErrorCode | "invalid_target",
    description: string,
    readonly redirectUri: string,
    readonly state: string | undefined,
  ) {
    super(description);
  }
}

/** The redirect back to the client: `params` plus state and iss (RFC 9207, mix-up defence). */
export function clientRedirect(
  redirectUri: string,
  issuer: string,
  state: string | undefined,
  params: Record<string, string>,
): string {
  const u = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  if (state !== undefined) u.searchParams.set("state", state);
  u.searchParams.set("iss", issuer);
  return u.toString();
}

/** Checks an authorization request's parameters (query or consent form). */
export async function checkAuthorizationRequest(
  db: Knex,
  p: Record<string, string | undefined>,
  resources: string[],
): Promise<AuthorizationRequest> {
  const client = await findClient(db, p.client_id);
  if (!client || client.redirectUris.length === 0)
    throw new UnredirectableError(
      "The application asking to sign in is not registered here (unknown client_id).",
    );
  const redirectUri =
    p.redirect_uri ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (!redirectUri || !client.redirectUris.includes(redirectUri))
    throw new UnredirectableError(
      "The address this sign-in would return to (redirect_uri) is not one the application registered.",
    );
  const fail = (error: OAuthErrorCode | "invalid_target", text: string) =>
    new RedirectableError(error, text, redirectUri, p.state);
  if (p.response_type !== "code") throw fail("unsupported_response_type", "response_type must be 'code'");
  if (!p.code_challenge) throw fail("invalid_request", "code_challenge is required (PKCE)");
  if (p.code_challenge_method !== "S256")
    throw fail("invalid_request", "code_challenge_method must be S256 (plain is not supported)");
  if (!S256_CHALLENGE.test(p.code_challenge))
    throw fail("invalid_request", "code_challenge is not a base64url SHA-256 (43 characters)");
  if (p.resource !== undefined && !resources.includes(p.resource.replace(/\/$/, "")))
    throw fail("invalid_target", `resource must be one of ${resources.join(", ")}`);
  let scope: string;
  try {
    scope = grantedScope(p.scope);
  } catch (err) {
    throw err instanceof OAuthError ? fail(err.error, err.description) : err;
  }
  return { client, redirectUri, state: p.state, codeChallenge: p.code_challenge, scope };
}

/** The person's answer: a code when approved; audited either way. */
export async function answerAuthorization(
  db: Knex,
  r: AuthorizationRequest,
  user: { id: string; tenant_id: string; email: string; role: Role },
  approve: boolean,
  ip: string,
): Promise<string | null> {
  const now = Date.now();
  // Codes live a minute: clear the ones long gone as new ones are made.
  if (approve) await pruneRows(db("oauth_authorization_codes").where("expires_at", "<", now - 3600_000));
  return transactionRetrying(db, async (trx) => {
    let code: string | null = null;
    if (approve) {
      code = mintToken("rac_");
      await trx("oauth_authorization_codes").insert({
        id: randomUUID(),
        code_hash: sha256Hex(code),
        client_id: r.client.id,
        user_id: user.id,
        tenant_id: user.tenant_id,
        redirect_uri: r.redirectUri,
        code_challenge: r.codeChallenge,
        scope: r.scope,
        family_id: randomUUID(),
        expires_at: now + CODE_TTL_MS,
        created_at: now,
      });
    }
    await appendAuditEvent(trx, {
      tenantId: user.tenant_id,
      eventType: approve ? "oauth.authorization_approved" : "oauth.authorization_denied",
      keyId: user.id,
      payload: {
        ...userActor(user, ip),
        client_id: r.client.id,
        client_name: r.client.name,
        redirect_uri: r.redirectUri,
      },
    });
    return code;
  });
}

interface CodeRow {
  id: string;
  client_id: string;
  user_id: string;
  tenant_id: string;
  redirect_uri: string;
  code_challenge: string;
  scope: string | null;
  family_id: string;
  expires_at: number;
  used_at: number | null;
}

/** grant_type=authorization_code (RFC 6749 §4.1.3, RFC 7636 §4.6). */
export async function redeemCode(
  db: Knex,
  cfg: AccountsConfig,
  p: { code: string; redirectUri: string; codeVerifier: string; clientId: string },
  ip: string,
): Promise<TokenResponse> {
  const row = p.code.startsWith("rac_")
    ? await db("oauth_authorization_codes")
        .where({ code_hash: sha256Hex(p.code) })
        .first<CodeRow | undefined>()
    : undefined;
  if (!row) throw new OAuthError("invalid_grant", "unknown authorization code");
  if (row.client_id !== p.clientId)
    throw new OAuthError("invalid_grant", "the code was issued to another client");
  if (row.used_at !== null) return reused(db, row, ip);
  if (Number(row.expires_at) <= Date.now()) throw new OAuthError("invalid_grant", "the code has expired");
  if (row.redirect_uri !== p.redirectUri)
    throw new OAuthError("invalid_grant", "redirect_uri differs from the authorization request's");
  const challenge = createHash("sha256").update(p.codeVerifier).digest("base64url");
  if (!VERIFIER.test(p.codeVerifier) || challenge !== row.code_challenge)
    throw new OAuthError("invalid_grant", "code_verifier does not match the code_challenge (PKCE)");
  const user = await db("users")
    .where({ id: row.user_id })
    .first<{ disabled_at: number | null } | undefined>("disabled_at");
  if (!user || user.disabled_at !== null)
    throw new OAuthError("invalid_grant", "the user's account is disabled");
  await clearExpiredTokens(db, row.user_id);
  const tokens = await transactionRetrying(db, async (trx) => {
    const claimed = await trx("oauth_authorization_codes")
      .where({ id: row.id })
      .whereNull("used_at")
      .update({ used_at: Date.now() });
    if (Number(claimed) !== 1) return null;
    return startFamily(
      trx,
      cfg,
      {
        userId: row.user_id,
        tenantId: row.tenant_id,
        clientId: row.client_id,
        scope: row.scope,
        familyId: row.family_id,
      },
      "authorization_code",
    );
  });
  return tokens ?? reused(db, row, ip);
}

/** RFC 6749 §4.1.2: a code used twice was stolen or replayed; its tokens are revoked. */
async function reused(db: Knex, row: CodeRow, ip: string): Promise<never> {
  await transactionRetrying(db, async (trx) => {
    const revoked = await revokeFamily(trx, row.family_id);
    await appendAuditEvent(trx, {
      tenantId: row.tenant_id,
      eventType: "oauth.authorization_code_reused",
      keyId: row.user_id,
      payload: {
        user_id: row.user_id,
        client_id: row.client_id,
        family_id: row.family_id,
        tokens_revoked: revoked,
        ip,
      },
    });
  });
  throw new OAuthError("invalid_grant", "the code was already used: the tokens it gave are revoked");
}

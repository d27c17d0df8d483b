// Web sessions: a random rcs_ token in an HttpOnly cookie, its SHA-256 in the
// database, so sign-out, a disabled user or a revoked session end access at the
// next request. Each session has a CSRF token derived from its secret (an HMAC
// would need a server key; the session secret already is one the attacker
// lacks): every cookie-authenticated form post must carry it.
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { pruneRows } from "../db/prune.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import type { UserRow } from "./users.js";

export const SESSION_COOKIE = "relayctl_session";
/** Before sign-in there is no session: the login form uses a double-submit cookie instead. */
export const LOGIN_CSRF_COOKIE = "relayctl_login_csrf";

export interface WebSession {
  id: string;
  token: string;
  user: UserRow;
  csrf: string;
}

export function csrfOf(sessionToken: string): string {
  return createHash("sha256").update(`relayctl csrf\n${sessionToken}`).digest("base64url");
}

export function sameSecret(a: string | undefined, b: string): boolean {
  if (typeof a !== "string") return false;
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i < 1) continue;
    const name = part.slice(0, i).trim();
    try {
      out[name] ??= decodeURIComponent(part.slice(i + 1).trim());
    } catch {
      // a cookie that is not ours; ignore it
    }
  }
  return out;
}

/**
 * Secure outside dev: whenever the request came over HTTPS (directly or through a
 * trusted proxy) or RELAYCTL_PUBLIC_URL is https (a TLS proxy relayctl was not
 * told about). A cookie set again in the same answer replaces the first: each
 * name is set once per answer, so no browser has to pick which one wins.
 */
export function setCookie(
  req: FastifyRequest,
  reply: FastifyReply,
  name: string,
  value: string,
  maxAge: number,
) {
  const secure = req.protocol === "https" || req.server.secureCookies ? "; Secure" : "";
  const cookie = `${name}=${encodeURIComponent(value)}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${secure}`;
  const prev = reply.getHeader("set-cookie");
  const list = Array.isArray(prev) ? prev : prev ? [String(prev)] : [];
  // Fastify appends to a set-cookie already there: the list is written whole, once.
  reply.removeHeader("set-cookie");
  reply.header("set-cookie", [...list.filter((c) => !c.startsWith(`${name}=`)), cookie]);
}

/** `userAgent`: the browser's own words, kept so its person recognises the session (Account page). */
export async function createSession(
  db: Knex,
  user: UserRow,
  ip: string,
  ttlSeconds: number,
  userAgent?: string,
) {
  const token = mintToken("rcs_");
  const now = Date.now();
  // Ended sessions of this user are kept no longer than it takes to sign in again.
  await pruneRows(db("web_sessions").where({ user_id: user.id }).where("expires_at", "<", now));
  await db("web_sessions").insert({
    id: randomUUID(),
    user_id: user.id,
    tenant_id: user.tenant_id,
    token_hash: sha256Hex(token),
    expires_at: now + ttlSeconds * 1000,
    ip: ip.slice(0, 64),
    user_agent: userAgent ? userAgent.slice(0, 255) : null,
    created_at: now,
    last_used_at: now,
  });
  return token;
}

/** The live session of the request's cookie, or undefined (none, unknown, expired, revoked, user disabled). */
export async function currentSession(db: Knex, req: FastifyRequest): Promise<WebSession | undefined> {
  const token = parseCookies(req.headers.cookie)[SESSION_COOKIE];
  if (!token?.startsWith("rcs_")) return undefined;
  const row = await db("web_sessions as s")
    .join("users as u", "u.id", "s.user_id")
    .where({ "s.token_hash": sha256Hex(token) })
    .whereNull("s.revoked_at")
    .where("s.expires_at", ">", Date.now())
    .whereNull("u.disabled_at")
    .first<(UserRow & { session_id: string }) | undefined>(
      "s.id as session_id",
      "u.id",
      "u.tenant_id",
      "u.email",
      "u.role",
      "u.can_exec",
      "u.password_hash",
      "u.disabled_at",
      "u.created_at",
    );
  if (!row) return undefined;
  const { session_id, ...user } = row;
  return { id: session_id, token, user, csrf: csrfOf(token) };
}

/** 403 unless the form carries the session's CSRF token. */
export function requireCsrf(session: WebSession, body: Record<string, string>): void {
  if (!sameSecret(body.csrf_token, session.csrf)) throw new RcError("RC_ERR_CSRF");
}

export async function revokeSession(db: Knex, id: string): Promise<void> {
  await db("web_sessions").where({ id }).whereNull("revoked_at").update({ revoked_at: Date.now() });
}

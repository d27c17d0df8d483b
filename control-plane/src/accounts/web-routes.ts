// The sign-in pages: GET/POST /login, POST /logout, GET /account, and the
// invite link /invite/<token>. Cookie-authenticated posts carry the session's
// CSRF token; the login form (no session yet) a double-submit token. Attempts
// are limited per (account, IP), per IP, and per account from anywhere (slower;
// see attempt-limits.ts); every sign-in, failure and sign-out is audited.
import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { z } from "zod";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import { KNOWN_ADDRESS_MS, LIMITS, countAttempt, countOneAttempt, refundAttempt } from "./attempt-limits.js";
import { auditUserEvent } from "./audit.js";
import type { FormBody } from "./form-body.js";
import { csrfField, html, sendPage } from "./html.js";
import { acceptInvite, findInvite } from "./invites.js";
import { dummyHash, verifyPassword } from "./password.js";
import {
  LOGIN_CSRF_COOKIE,
  SESSION_COOKIE,
  createSession,
  currentSession,
  parseCookies,
  requireCsrf,
  revokeSession,
  sameSecret,
  setCookie,
} from "./sessions.js";
import { findUsersByEmail } from "./users.js";

/** Only a path of this site: never "//host" or "https://..." (an open redirect). */
export function safeNext(next: unknown): string {
  return typeof next === "string" && /^\/(?![/\\])[^\s]*$/.test(next) ? next : "/account";
}

/**
 * `choose`: the e-mail and password opened accounts in several tenants (accounts
 * are per tenant); the form asks again with the tenant to sign in to. Only the
 * tenants whose account that password opened are named. `email`: what was typed,
 * kept after a refusal so only the password is typed again.
 */
function loginPage(
  req: FastifyRequest,
  reply: FastifyReply,
  status: number,
  next: string,
  error?: string,
  choose?: { tenants: string[] },
  email = "",
) {
  const token = randomBytes(24).toString("base64url");
  setCookie(req, reply, LOGIN_CSRF_COOKIE, token, 3600);
  const tenantField = choose
    ? html`<label>Tenant <select name="tenant" required>${choose.tenants.map(
        (t) => html`<option value="${t}">${t}</option>`,
      )}</select></label>`
    : "";
  return sendPage(
    reply,
    status,
    "Sign in",
    html`${error ? html`<p class="error" role="alert">${error}</p>` : ""}
<form method="post" action="/login" class="form">${csrfField(token)}<input type="hidden" name="next" value="${next}">
<label>E-mail <input name="email" type="email" autocomplete="username" required value="${email}"${email ? "" : html` autofocus`}></label>
${tenantField}<label>Password <input name="password" type="password" autocomplete="current-password" required${email ? html` autofocus` : ""}></label>
<button type="submit" class="primary">Sign in</button></form>`,
  );
}

/**
 * The accounts of `email` (in every tenant, or the one named) that `password`
 * opens. Tried in parallel (scrypt runs on libuv's pool), so the answer's time
 * says little about how many tenants have the address; with none, a dummy hash
 * costs the same as one wrong password.
 */
async function accountsOpened(db: ApiContext["db"], email: string, password: string, tenant: string) {
  const all = await findUsersByEmail(db, email);
  const tried = tenant ? all.filter((u) => u.tenant_name === tenant) : all;
  if (tried.length === 0) {
    await verifyPassword(password, await dummyHash());
    return { tried, opened: [] };
  }
  const ok = await Promise.all(tried.map((u) => verifyPassword(password, u.password_hash)));
  return { tried, opened: tried.filter((_, i) => ok[i]) };
}

/** Those of `users` that signed in from `ip` within KNOWN_ADDRESS_MS (their own address, not a guesser's). */
async function signedInFrom<U extends { id: string }>(db: ApiContext["db"], users: U[], ip: string) {
  if (users.length === 0) return users;
  const rows = await db("web_sessions")
    .whereIn(
      "user_id",
      users.map((u) => u.id),
    )
    .where({ ip })
    .where("created_at", ">", Date.now() - KNOWN_ADDRESS_MS)
    .distinct<{ user_id: string }[]>("user_id");
  const known = new Set(rows.map((r) => r.user_id));
  return users.filter((u) => known.has(u.id));
}

const tokenParams = z.object({ token: z.string() });

/** A page of the people part (browsers post forms). */
const page = { tag: "people", accepts: "form" } as const;

export function webRoutes(ctx: ApiContext): RouteSpec[] {
  const { db } = ctx;
  const ttl = ctx.config.accounts.webSessionTtlSeconds;
  return [
    route({
      method: "GET",
      url: "/login",
      access: { public: "the sign-in form: no credential yet" },
      ...page,
      handler: async (req, reply) =>
        loginPage(req, reply, 200, safeNext((req.query as Record<string, unknown>).next)),
    }),

    route({
      method: "POST",
      url: "/login",
      access: {
        public:
          "the sign-in form: e-mail and password, with its double-submit CSRF token, limited per (account, IP), per IP and per account",
      },
      ...page,
      handler: async (req, reply) => {
        const body = (req.body ?? {}) as FormBody;
        const next = safeNext(body.next);
        const typed = String(body.email ?? "").trim();
        if (!sameSecret(body.csrf_token, parseCookies(req.headers.cookie)[LOGIN_CSRF_COOKIE] ?? "\0"))
          return loginPage(req, reply, 403, next, "The form expired: sign in again.", undefined, typed);
        const email = typed.toLowerCase();
        // Failures count per (account, IP) and per IP: a stranger's guesses limit the stranger.
        const subjects = [
          { label: `signin-ip\n${req.ip}`, limit: LIMITS.signinIp },
          { label: `signin-account-ip\n${email}\n${req.ip}`, limit: LIMITS.signinAccountIp },
        ];
        const anywhere = { label: `signin-account\n${email}`, limit: LIMITS.signinAccount };
        const limited = async (detail: string, retryAfter: number) => {
          for (const user of await findUsersByEmail(db, email))
            await auditUserEvent(db, req.log, user, req.ip, "auth.signin_limited", { detail });
          reply.header("retry-after", String(retryAfter));
          return loginPage(
            req,
            reply,
            429,
            next,
            "Too many sign-in attempts. Wait a few minutes and try again.",
            undefined,
            typed,
          );
        };
        try {
          await countAttempt(db, subjects);
        } catch (err) {
          if (!(err instanceof RcError)) throw err;
          return limited(err.detail, Number(err.extra.retry_after ?? 60));
        }
        const overall = await countOneAttempt(db, anywhere);
        const { tried, opened } = await accountsOpened(
          db,
          email,
          String(body.password ?? ""),
          String(body.tenant ?? ""),
        );
        let usable = opened.filter((u) => u.disabled_at === null);
        if (!overall.allowed) {
          // Past the account's global limit only the right password from an address
          // it signed in from before gets through; anything else, right or wrong,
          // gets the same 429, so the answer tells a spread-out guesser nothing.
          usable = await signedInFrom(db, usable, req.ip);
          if (usable.length === 0)
            return limited(
              `too many attempts at this account from anywhere: retry in ${overall.retryAfterSeconds} s`,
              overall.retryAfterSeconds,
            );
        }
        if (usable.length === 0) {
          for (const u of tried)
            await auditUserEvent(db, req.log, u, req.ip, "auth.signin_failed", {
              reason: opened.includes(u) ? "disabled" : "password",
            });
          if (tried.length === 0) req.log.info({ ip: req.ip }, "sign-in failed for an unknown e-mail");
          return loginPage(req, reply, 401, next, "Wrong e-mail or password.", undefined, typed);
        }
        await refundAttempt(db, [...subjects, anywhere]);
        if (usable.length > 1)
          return loginPage(
            req,
            reply,
            200,
            next,
            "This e-mail and password open accounts in more than one tenant: choose one.",
            { tenants: usable.map((u) => u.tenant_name) },
            typed,
          );
        const user = usable[0]!;
        const token = await createSession(db, user, req.ip, ttl, req.headers["user-agent"]);
        setCookie(req, reply, SESSION_COOKIE, token, ttl);
        setCookie(req, reply, LOGIN_CSRF_COOKIE, "", 0);
        await auditUserEvent(db, req.log, user, req.ip, "auth.signin", { method: "password" });
        return reply.redirect(next, 303);
      },
    }),

    route({
      method: "POST",
      url: "/logout",
      access: { public: "the session cookie, with its CSRF token; without one it only clears the cookie" },
      ...page,
      handler: async (req, reply) => {
        const session = await currentSession(db, req);
        if (session) {
          requireCsrf(session, (req.body ?? {}) as FormBody);
          await revokeSession(db, session.id);
          await auditUserEvent(db, req.log, session.user, req.ip, "auth.signout");
        }
        setCookie(req, reply, SESSION_COOKIE, "", 0);
        return reply.redirect("/login", 303);
      },
    }),

    route({
      method: "GET",
      url: "/account",
      access: { public: "the session cookie; without one it leads to sign-in" },
      ...page,
      handler: async (req, reply) => {
        const session = await currentSession(db, req);
        if (!session) return reply.redirect("/login?next=/account", 303);
        return sendPage(
          reply,
          200,
          "Your account",
          html`<p>Signed in as <strong>${session.user.email}</strong> (${session.user.role}).</p>
<p><a href="/app/">Open the dashboard</a> · <a href="/device">Approve a device</a></p>
<form method="post" action="/logout">${csrfField(session.csrf)}<button type="submit">Sign out</button></form>`,
        );
      },
    }),

    route({
      method: "GET",
      url: "/invite/:token",
      access: { public: "the invite token in the URL" },
      ...page,
      schema: { params: tokenParams },
      handler: async (req, reply) => {
        const invite = await findInvite(db, req.params.token).catch(() => undefined);
        if (!invite)
          return sendPage(
            reply,
            404,
            "Invite",
            html`<p class="error" role="alert">This invite link is unknown, used or expired (or was revoked). Ask an owner for a new one.</p>`,
          );
        return sendPage(
          reply,
          200,
          "Join relayctl",
          html`<p>Create the account <strong>${invite.email}</strong> (${invite.role}).</p>
<form method="post" action="/invite/${req.params.token}" class="form">
<input type="email" name="email" autocomplete="username" value="${invite.email}" readonly hidden>
<label>Password (12 characters or more) <input name="password" type="password" autocomplete="new-password" required minlength="12" autofocus></label>
<button type="submit" class="primary">Create account</button></form>`,
        );
      },
    }),

    route({
      method: "POST",
      url: "/invite/:token",
      access: { public: "the invite token in the URL (single use), no session yet" },
      ...page,
      schema: { params: tokenParams },
      handler: async (req, reply) => {
        const body = (req.body ?? {}) as FormBody;
        try {
          const user = await acceptInvite(db, req.params.token, String(body.password ?? ""), req.ip);
          return sendPage(
            reply,
            201,
            "Account created",
            html`<p class="ok-note">Welcome, ${user.email}. <a href="/login">Sign in</a>.</p>`,
          );
        } catch (err) {
          if (!(err instanceof RcError)) throw err;
          return sendPage(
            reply,
            err.status,
            "Join relayctl",
            html`<p class="error" role="alert">${err.detail}</p>`,
          );
        }
      },
    }),
  ];
}

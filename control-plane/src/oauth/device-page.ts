// The verification page of the device flow (RFC 8628 §3.3): a signed-in person
// types the user code (or arrives with it in verification_uri_complete), sees
// which client asks, and approves or denies. Cookie-authenticated posts carry
// the session's CSRF token; typed codes are limited per user and per IP, since
// a guessed code would hand a stranger's device a token.
import type { FastifyReply, FastifyRequest } from "fastify";
import { LIMITS, countAttempt, refundAttempt } from "../accounts/attempt-limits.js";
import type { FormBody } from "../accounts/form-body.js";
import { csrfField, html, sendPage } from "../accounts/html.js";
import { type WebSession, currentSession, requireCsrf } from "../accounts/sessions.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import { findClient } from "./clients.js";
import { scopeList } from "./scopes.js";
import { decide, displayUserCode, findPendingByUserCode, normalizeUserCode } from "./device.js";

function codeForm(reply: FastifyReply, s: WebSession, status: number, code: string, error?: string) {
  return sendPage(
    reply,
    status,
    "Connect a device",
    html`${error ? html`<p class="error" role="alert">${error}</p>` : ""}<p>Signed in as ${s.user.email}.</p>
<form method="post" action="/device" class="form">${csrfField(s.csrf)}
<label>Code shown by your device <input name="user_code" value="${code}" autocomplete="off" autocapitalize="characters" spellcheck="false" required autofocus></label>
<button type="submit" class="primary">Continue</button></form>`,
  );
}

/** A page of the device flow: the person's session cookie, or a redirect to sign in. */
const page = {
  tag: "people",
  accepts: "form",
  access: {
    public:
      "the session cookie (the CSRF token on a post); without one it leads to sign-in; typed codes are limited per person and per IP",
  },
} as const;

export function devicePageRoutes(ctx: ApiContext): RouteSpec[] {
  const { db } = ctx;

  const session = async (req: FastifyRequest, reply: FastifyReply) => {
    const s = await currentSession(db, req);
    if (!s) {
      const code = (req.query as Record<string, string> | undefined)?.user_code;
      const next = code ? `/device?user_code=${encodeURIComponent(code)}` : "/device";
      await reply.redirect(`/login?next=${encodeURIComponent(next)}`, 303);
    }
    return s;
  };

  const subjects = (req: FastifyRequest, s: WebSession) => [
    { label: `device-ip\n${req.ip}`, limit: LIMITS.deviceCodeIp },
    { label: `device-user\n${s.user.id}`, limit: LIMITS.deviceCodeUser },
  ];

  /** Counts a typed code against the limits; true with the page sent when over. */
  const limited = async (req: FastifyRequest, reply: FastifyReply, s: WebSession, code: string) => {
    try {
      await countAttempt(db, subjects(req, s));
      return false;
    } catch (err) {
      if (!(err instanceof RcError)) throw err;
      reply.header("retry-after", String(err.extra.retry_after ?? 60));
      await codeForm(reply, s, 429, code, "Too many codes tried. Wait a few minutes and try again.");
      return true;
    }
  };

  return [
    route({
      ...page,
      method: "GET",
      url: "/device",
      handler: async (req, reply) => {
        const s = await session(req, reply);
        if (!s) return reply;
        return codeForm(reply, s, 200, (req.query as Record<string, string>).user_code ?? "");
      },
    }),

    route({
      ...page,
      method: "POST",
      url: "/device",
      handler: async (req, reply) => {
        const s = await session(req, reply);
        if (!s) return reply;
        const body = (req.body ?? {}) as FormBody;
        requireCsrf(s, body);
        const typed = String(body.user_code ?? "");
        if (await limited(req, reply, s, typed)) return reply;
        const code = normalizeUserCode(typed);
        const row = code ? await findPendingByUserCode(db, code) : undefined;
        if (!row || !code) return codeForm(reply, s, 404, typed, "That code is unknown or has expired.");
        await refundAttempt(db, subjects(req, s));
        const client = await findClient(db, row.client_id);
        return sendPage(
          reply,
          200,
          "Approve this device?",
          html`<p><strong>${client?.name ?? row.client_id}</strong> (<code>${row.client_id}</code>) asks to act as
<strong>${s.user.email}</strong> (${s.user.role}) with the scopes <code>${row.scope ?? ""}</code>:</p>
${scopeList(row.scope ?? "")}
<p>Code: <code>${displayUserCode(code)}</code>. Approve only if your device shows this same code.</p>
<form method="post" action="/device/decision" class="row">${csrfField(s.csrf)}<input type="hidden" name="user_code" value="${code}">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button></form>`,
        );
      },
    }),

    route({
      ...page,
      method: "POST",
      url: "/device/decision",
      handler: async (req, reply) => {
        const s = await session(req, reply);
        if (!s) return reply;
        const body = (req.body ?? {}) as FormBody;
        requireCsrf(s, body);
        const typed = String(body.user_code ?? "");
        if (await limited(req, reply, s, typed)) return reply;
        const code = normalizeUserCode(typed);
        if (body.decision !== "approve" && body.decision !== "deny")
          return codeForm(reply, s, 400, typed, "Choose Approve or Deny.");
        const approve = body.decision === "approve";
        if (!code || !(await decide(db, code, s.user, approve, req.ip)))
          return codeForm(reply, s, 404, typed, "That code is unknown, expired or already answered.");
        await refundAttempt(db, subjects(req, s));
        return sendPage(
          reply,
          200,
          approve ? "Device approved" : "Request denied",
          html`<p class="${approve ? "ok-note" : "hint"}">${approve ? "You can go back to your device: it is signed in." : "The device was refused; nothing was shared."}</p>`,
        );
      },
    }),
  ];
}

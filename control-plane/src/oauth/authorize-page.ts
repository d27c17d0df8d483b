// The authorization endpoint (RFC 6749 §3.1, §4.1.1) as a page: a signed-in
// person sees which client asks and approves or denies with a CSRF-protected
// post; the answer goes back to the client's registered redirect URI with a
// code or error=access_denied. Without a session the person signs in first and
// comes back here. Errors about the client or its redirect URI are shown, never
// redirected (RFC 6749 §4.1.2.1); so is any other error until the signed-in person
// posted the consent page, since every client with a redirect URI registered
// itself (RFC 9700 §4.11.2: no open redirect through a self-registered client).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { FormBody } from "../accounts/form-body.js";
import { csrfField, html, sendPage } from "../accounts/html.js";
import { currentSession, requireCsrf } from "../accounts/sessions.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import {
  type AuthorizationRequest,
  RedirectableError,
  UnredirectableError,
  answerAuthorization,
  checkAuthorizationRequest,
  clientRedirect,
} from "./authorization-code.js";
import { issuerOf } from "./routes.js";
import { scopeList } from "./scopes.js";

export const AUTHORIZE_PATH = "/oauth/authorize";
/** The request's parameters, carried from the query into the consent form. */
const PARAMS = [
  "response_type",
  "client_id",
  "redirect_uri",
  "state",
  "code_challenge",
  "code_challenge_method",
  "scope",
  "resource",
];

function pick(src: Record<string, unknown>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const k of PARAMS) if (typeof src[k] === "string") out[k] = src[k] as string;
  return out;
}

/** The consent page: the person's session cookie, or a redirect to sign in. */
const page = {
  tag: "people",
  accepts: "form",
  access: {
    public:
      "RFC 6749 §4.1.1: the client's registered redirect URI and PKCE, then the session cookie (the CSRF token on a post); without one it leads to sign-in",
  },
} as const;

export function authorizePageRoutes(ctx: ApiContext): RouteSpec[] {
  const { db } = ctx;

  const refused = (reply: FastifyReply, message: string) =>
    sendPage(
      reply,
      400,
      "Sign-in request refused",
      html`<p class="error" role="alert">${message}</p>
<p>Nothing was shared. Start the sign-in again from your application.</p>`,
    );

  /**
   * The checked request, or the reply already sent (error page or error redirect).
   * `consented`: the person, signed in, posted the consent page. Before that an
   * error is shown, never redirected: anyone can register a client with any https
   * redirect URI, and an error redirect would make /oauth/authorize an open
   * redirector to it (RFC 9700 §4.11.2).
   */
  const check = async (
    req: FastifyRequest,
    reply: FastifyReply,
    p: Record<string, string | undefined>,
    consented: boolean,
  ) => {
    const issuer = issuerOf(ctx, req);
    try {
      return await checkAuthorizationRequest(db, p, [`${issuer}/mcp`, issuer]);
    } catch (err) {
      if (err instanceof UnredirectableError) {
        await refused(reply, err.message);
        return undefined;
      }
      if (err instanceof RedirectableError && !consented) {
        await refused(
          reply,
          `The application's sign-in request is not valid: ${err.message} (${err.error}).`,
        );
        return undefined;
      }
      if (err instanceof RedirectableError) {
        await reply.redirect(
          clientRedirect(err.redirectUri, issuer, err.state, {
            error: err.error,
            error_description: err.message,
          }),
          303,
        );
        return undefined;
      }
      throw err;
    }
  };

  const consent = (
    reply: FastifyReply,
    r: AuthorizationRequest,
    p: Record<string, string | undefined>,
    email: string,
    role: string,
    csrf: string,
  ) =>
    sendPage(
      reply,
      200,
      "Allow access?",
      html`<p><strong>${r.client.name}</strong> asks to act as <strong>${email}</strong> (${role}) with the
scopes <code>${r.scope ?? ""}</code>:</p>
${scopeList(r.scope ?? "")}
<p>It will be sent back to <code>${new URL(r.redirectUri).origin}</code>. The application chose its own name
when it registered: approve only if you just started this sign-in yourself.</p>
<form method="post" action="${AUTHORIZE_PATH}" class="row">${csrfField(csrf)}
${Object.entries(p).map(([k, v]) => (v === undefined ? "" : html`<input type="hidden" name="${k}" value="${v}">`))}
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button></form>`,
      [new URL(r.redirectUri).origin],
    );

  const toLogin = (reply: FastifyReply, p: Record<string, string | undefined>) => {
    const q = new URLSearchParams(Object.entries(p).filter((e): e is [string, string] => e[1] !== undefined));
    return reply.redirect(`/login?next=${encodeURIComponent(`${AUTHORIZE_PATH}?${q}`)}`, 303);
  };

  return [
    route({
      ...page,
      method: "GET",
      url: AUTHORIZE_PATH,
      handler: async (req, reply) => {
        const p = pick(req.query as Record<string, unknown>);
        const r = await check(req, reply, p, false);
        if (!r) return reply;
        const s = await currentSession(db, req);
        if (!s) return toLogin(reply, p);
        return consent(reply, r, p, s.user.email, s.user.role, s.csrf);
      },
    }),

    route({
      ...page,
      method: "POST",
      url: AUTHORIZE_PATH,
      handler: async (req, reply) => {
        const body = (req.body ?? {}) as FormBody;
        const p = pick(body);
        const s = await currentSession(db, req);
        if (!s) return toLogin(reply, p);
        requireCsrf(s, body);
        const r = await check(req, reply, p, true);
        if (!r) return reply;
        if (body.decision !== "approve" && body.decision !== "deny")
          return consent(reply, r, p, s.user.email, s.user.role, s.csrf);
        const approve = body.decision === "approve";
        const code = await answerAuthorization(db, r, s.user, approve, req.ip);
        const issuer = issuerOf(ctx, req);
        return reply.redirect(
          clientRedirect(
            r.redirectUri,
            issuer,
            r.state,
            code ? { code } : { error: "access_denied", error_description: "the user denied the request" },
          ),
          303,
        );
      },
    }),
  ];
}

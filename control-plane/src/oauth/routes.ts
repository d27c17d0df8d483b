// The authorization server's endpoints, exactly by the RFCs: device
// authorization (RFC 8628 §3.1), token (RFC 6749 §4/§6 with RFC 8628 §3.4 and
// the authorization code grant with PKCE, RFC 7636), dynamic client
// registration (RFC 7591, JSON), revocation (RFC 7009) and metadata (RFC 8414).
// Parameters are form-encoded; errors are RFC 6749 §5.2 objects (errors.ts);
// answers are no-store. The authorization endpoint is a page: authorize-page.ts.
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Knex } from "knex";
import { LIMITS, countAttempt } from "../accounts/attempt-limits.js";
import { type FormBody, REPEATED } from "../accounts/form-body.js";
import { OAUTH_SCOPES } from "../auth/roles.js";
import type { ApiContext } from "../http/context.js";
import { publicBaseUrl } from "../http/edge.js";
import { type RouteSpec, route } from "../http/route.js";
import { redeemCode } from "./authorization-code.js";
import { type OAuthClient, findClient, registerClient } from "./clients.js";
import { createDeviceAuthorization, pollDeviceCode } from "./device.js";
import { OAuthError, oauthErrorHandler } from "./errors.js";
import { grantedScope } from "./scopes.js";
import { refreshTokens, revokeToken } from "./tokens.js";

export const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/** The issuer: RELAYCTL_PUBLIC_URL, else (loopback only) the scheme and host the request came to. */
export function issuerOf(ctx: ApiContext, req: FastifyRequest): string {
  return publicBaseUrl(ctx.config, req);
}

function form(req: FastifyRequest): FormBody {
  const ct = String(req.headers["content-type"] ?? "");
  if (!ct.toLowerCase().startsWith("application/x-www-form-urlencoded"))
    throw new OAuthError("invalid_request", "send the parameters as application/x-www-form-urlencoded");
  const body = (req.body ?? {}) as FormBody;
  const repeated = body[REPEATED];
  if (repeated?.length) throw new OAuthError("invalid_request", `parameter '${repeated[0]}' is repeated`);
  return body;
}

function required(body: FormBody, name: string): string {
  const v = body[name];
  if (!v) throw new OAuthError("invalid_request", `missing parameter '${name}'`);
  return v;
}

/** Public clients authenticate with client_id alone (RFC 6749 §2.3, §3.2.1). */
async function client(db: Knex, body: FormBody): Promise<OAuthClient> {
  const c = await findClient(db, required(body, "client_id"));
  if (!c) throw new OAuthError("invalid_client", "unknown client_id");
  return c;
}

/** Every answer of the authorization server is no-store (RFC 6749 §5.1). */
async function noStore(_req: FastifyRequest, reply: FastifyReply) {
  reply.header("cache-control", "no-store").header("pragma", "no-cache");
}

/** An endpoint of the authorization server: OAuth's own rules, its errors, forms, no-store. */
const endpoint = {
  tag: "people",
  accepts: "form",
  options: { errorHandler: oauthErrorHandler, onSend: noStore },
} as const;

export function oauthRoutes(ctx: ApiContext): RouteSpec[] {
  const cfg = ctx.config.accounts;
  return [
    route({
      ...endpoint,
      method: "POST",
      url: "/oauth/device/code",
      access: { public: "RFC 8628 §3.1: a public client's client_id; limited per IP" },
      handler: async (req) => {
        const body = form(req);
        const c = await client(ctx.db, body);
        if (c.registered)
          throw new OAuthError(
            "unauthorized_client",
            "this client registered for the authorization code grant",
          );
        // Each request holds a user code for minutes: one address cannot take them by the thousand.
        await countAttempt(ctx.db, [{ label: `device-start-ip\n${req.ip}`, limit: LIMITS.deviceStartIp }]);
        const scope = grantedScope(body.scope);
        return createDeviceAuthorization(ctx.db, cfg, c.id, scope, `${issuerOf(ctx, req)}/device`);
      },
    }),

    route({
      ...endpoint,
      method: "POST",
      url: "/oauth/token",
      access: {
        public:
          "RFC 6749 §4, §6 and RFC 8628 §3.4: the client_id with the device code, authorization code (PKCE) or refresh token",
      },
      handler: async (req) => {
        const body = form(req);
        const grant = required(body, "grant_type");
        const c = await client(ctx.db, body);
        if (grant === DEVICE_GRANT) return pollDeviceCode(ctx.db, cfg, required(body, "device_code"), c.id);
        if (grant === "authorization_code")
          return redeemCode(
            ctx.db,
            cfg,
            {
              code: required(body, "code"),
              redirectUri: required(body, "redirect_uri"),
              codeVerifier: required(body, "code_verifier"),
              clientId: c.id,
            },
            req.ip,
          );
        if (grant === "refresh_token")
          return refreshTokens(ctx.db, cfg, required(body, "refresh_token"), c.id, req.ip);
        throw new OAuthError("unsupported_grant_type", `grant_type '${grant}' is not supported`);
      },
    }),

    route({
      ...endpoint,
      method: "POST",
      url: "/oauth/register",
      access: { public: "RFC 7591: open registration (JSON), limited per IP" },
      handler: async (req, reply) => {
        const meta = req.body;
        if (!meta || typeof meta !== "object" || Array.isArray(meta))
          throw new OAuthError("invalid_client_metadata", "send the client metadata as a JSON object");
        // Registration is open to anyone: one address cannot fill the table.
        await countAttempt(ctx.db, [{ label: `register-ip\n${req.ip}`, limit: LIMITS.registerIp }]);
        const registered = await registerClient(ctx.db, meta as Record<string, unknown>, req.ip);
        req.log.info({ client_id: registered.client_id, ip: req.ip }, "oauth: client registered");
        return reply.status(201).send(registered);
      },
    }),

    route({
      ...endpoint,
      method: "POST",
      url: "/oauth/revoke",
      access: { public: "RFC 7009: the client_id and the token to revoke" },
      handler: async (req, reply) => {
        const body = form(req);
        const c = await client(ctx.db, body);
        const hint = body.token_type_hint;
        if (hint && hint !== "access_token" && hint !== "refresh_token")
          throw new OAuthError("unsupported_token_type", `token_type_hint '${hint}' is not supported`);
        await revokeToken(ctx.db, required(body, "token"), c.id, req.ip);
        return reply.status(200).send();
      },
    }),

    route({
      ...endpoint,
      method: "GET",
      url: "/.well-known/oauth-authorization-server",
      access: { public: "RFC 8414: the authorization server's metadata, public by design" },
      handler: async (req) => {
        const issuer = issuerOf(ctx, req);
        return {
          issuer,
          authorization_endpoint: `${issuer}/oauth/authorize`,
          token_endpoint: `${issuer}/oauth/token`,
          registration_endpoint: `${issuer}/oauth/register`,
          device_authorization_endpoint: `${issuer}/oauth/device/code`,
          revocation_endpoint: `${issuer}/oauth/revoke`,
          grant_types_supported: ["authorization_code", DEVICE_GRANT, "refresh_token"],
          response_types_supported: ["code"],
          response_modes_supported: ["query"],
          code_challenge_methods_supported: ["S256"],
          authorization_response_iss_parameter_supported: true,
          token_endpoint_auth_methods_supported: ["none"],
          // What each grants: docs/people-and-cli.md#oauth-scopes (a token never exceeds its person's role).
          scopes_supported: [...OAUTH_SCOPES],
          revocation_endpoint_auth_methods_supported: ["none"],
          service_documentation: `${issuer}/device`,
        };
      },
    }),
  ];
}

// The authorization server's endpoints, exactly by the RFCs: device
// authorization (RFC 8628 §3.1), token (RFC 6749 §4/§6 with RFC 8628 §3.4),
// revocation (RFC 7009) and metadata (RFC 8414). Parameters are form-encoded;
// errors are RFC 6749 §5.2 objects (errors.ts); token answers are no-store.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import type { ApiContext } from "../api/context.js";
import { LIMITS, countAttempt } from "../accounts/attempt-limits.js";
import { type FormBody, REPEATED, acceptForms } from "../accounts/form-body.js";
import { type OAuthClient, findClient } from "./clients.js";
import { createDeviceAuthorization, pollDeviceCode } from "./device.js";
import { OAuthError, installOAuthErrors } from "./errors.js";
import { refreshTokens, revokeToken } from "./tokens.js";

export const DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code";

/** The issuer: RELAYCTL_PUBLIC_URL, else the scheme and host the request came to. */
export function issuerOf(ctx: ApiContext, req: FastifyRequest): string {
  return ctx.config.accounts.publicUrl ?? `${req.protocol}://${req.host}`;
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
function client(body: FormBody): OAuthClient {
  const c = findClient(required(body, "client_id"));
  if (!c) throw new OAuthError("invalid_client", "unknown client_id");
  return c;
}

export const oauthRoutes =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    acceptForms(app);
    installOAuthErrors(app);
    const cfg = ctx.config.accounts;
    app.addHook("onSend", async (_req, reply) => {
      reply.header("cache-control", "no-store").header("pragma", "no-cache");
    });

    app.post("/oauth/device/code", async (req) => {
      const body = form(req);
      const c = client(body);
      // Each request holds a user code for minutes: one address cannot take them by the thousand.
      await countAttempt(ctx.db, [{ label: `device-start-ip\n${req.ip}`, limit: LIMITS.deviceStartIp }]);
      const scope = body.scope ? body.scope.trim() : null;
      return createDeviceAuthorization(ctx.db, cfg, c.id, scope, `${issuerOf(ctx, req)}/device`);
    });

    app.post("/oauth/token", async (req) => {
      const body = form(req);
      const grant = required(body, "grant_type");
      const c = client(body);
      if (grant === DEVICE_GRANT) return pollDeviceCode(ctx.db, cfg, required(body, "device_code"), c.id);
      if (grant === "refresh_token")
        return refreshTokens(ctx.db, cfg, required(body, "refresh_token"), c.id, req.ip);
      throw new OAuthError("unsupported_grant_type", `grant_type '${grant}' is not supported`);
    });

    app.post("/oauth/revoke", async (req, reply) => {
      const body = form(req);
      const c = client(body);
      const hint = body.token_type_hint;
      if (hint && hint !== "access_token" && hint !== "refresh_token")
        throw new OAuthError("unsupported_token_type", `token_type_hint '${hint}' is not supported`);
      await revokeToken(ctx.db, required(body, "token"), c.id, req.ip);
      return reply.status(200).send();
    });

    app.get("/.well-known/oauth-authorization-server", async (req) => {
      const issuer = issuerOf(ctx, req);
      return {
        issuer,
        token_endpoint: `${issuer}/oauth/token`,
        device_authorization_endpoint: `${issuer}/oauth/device/code`,
        revocation_endpoint: `${issuer}/oauth/revoke`,
        grant_types_supported: [DEVICE_GRANT, "refresh_token"],
        // No authorization endpoint: people approve on /device, never through a redirect.
        response_types_supported: [],
        token_endpoint_auth_methods_supported: ["none"],
        revocation_endpoint_auth_methods_supported: ["none"],
        service_documentation: `${issuer}/device`,
      };
    });
  };

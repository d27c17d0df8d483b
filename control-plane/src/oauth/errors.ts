// OAuth's own error shape (RFC 6749 §5.2, RFC 8628 §3.5, RFC 7009 §2.2.1,
// RFC 7591 §3.2.2):
// `{"error": code, "error_description": text}`, 400 for most and 401 for an
// unknown client. The OAuth endpoints answer in it instead of the api's
// `{"detail"}`, because third-party clients parse it.
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { toRcError } from "../http/errors.js";

export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "invalid_scope"
  | "authorization_pending"
  | "slow_down"
  | "access_denied"
  | "expired_token"
  | "unsupported_token_type"
  | "server_error"
  | "unsupported_response_type"
  | "invalid_redirect_uri"
  | "invalid_client_metadata";

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === "invalid_client" ? 401 : error === "server_error" ? 500 : 400,
  ) {
    super(description);
  }
}

/** The OAuth endpoints' error handler: OAuth errors as they are, anything else mapped onto one. */
export function oauthErrorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  let e: OAuthError;
  if (err instanceof OAuthError) e = err;
  else {
    const rc = toRcError(err);
    if (rc.status >= 500) req.log.error({ err }, rc.code);
    if (rc.status === 429 && rc.extra.retry_after) reply.header("retry-after", String(rc.extra.retry_after));
    e =
      rc.status === 429
        ? new OAuthError("slow_down", rc.detail, 429)
        : rc.status >= 500
          ? new OAuthError("server_error", "the authorization server failed; retry later", rc.status)
          : new OAuthError("invalid_request", rc.detail);
  }
  if (e.status === 401) reply.header("www-authenticate", 'Basic realm="relayctl"');
  return reply
    .status(e.status)
    .header("cache-control", "no-store")
    .header("pragma", "no-cache")
    .send({ error: e.error, error_description: e.description });
}

// The OAuth clients relayctl's authorization server knows. All are public
// clients (RFC 6749 §2.1: they cannot keep a secret, so they authenticate with
// their client_id alone): the built-in command-line client, which uses the
// device flow, and clients that registered themselves (RFC 7591, MCP clients)
// with the redirect URIs their authorization codes may be sent to.
import { randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { OAuthError } from "./errors.js";

export interface OAuthClient {
  id: string;
  /** Shown on the approval pages: who is asking. */
  name: string;
  /** Exact redirect URIs of the authorization code grant; none for the device flow's client. */
  redirectUris: string[];
  /** Registered by anyone (RFC 7591), so its name is a claim, not a fact. */
  registered: boolean;
}

const BUILT_IN: Record<string, OAuthClient> = {
  "relayctl-cli": {
    id: "relayctl-cli",
    name: "relayctl command-line client",
    redirectUris: [],
    registered: false,
  },
};

export async function findClient(db: Knex, id: unknown): Promise<OAuthClient | undefined> {
  if (typeof id !== "string" || id.length > 64) return undefined;
  if (Object.hasOwn(BUILT_IN, id)) return BUILT_IN[id];
  const row = await db("oauth_clients")
    .where({ id })
    .first<{ id: string; name: string; redirect_uris: string } | undefined>("id", "name", "redirect_uris");
  return row
    ? { id: row.id, name: row.name, redirectUris: JSON.parse(row.redirect_uris), registered: true }
    : undefined;
}

const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/**
 * A redirect URI a code may go to: https anywhere, or http to this machine's
 * loopback on any port (RFC 8252 §7.3, native apps); never a fragment (RFC 6749 §3.1.2).
 */
export function acceptableRedirectUri(uri: unknown): boolean {
  if (typeof uri !== "string" || uri.length > 2000) return false;
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  if (u.hash || uri.includes("#") || u.username || u.password) return false;
  return u.protocol === "https:" || (u.protocol === "http:" && LOOPBACK.has(u.hostname));
}

const GRANTS = ["authorization_code", "refresh_token"];

/** RFC 7591 §3.1/§3.2: validates the client's metadata, stores it, answers with what was registered. */
export async function registerClient(db: Knex, meta: Record<string, unknown>, ip: string) {
  const uris = meta.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > 10)
    throw new OAuthError("invalid_redirect_uri", "redirect_uris must list 1 to 10 URIs");
  for (const u of uris)
    if (!acceptableRedirectUri(u))
      throw new OAuthError(
        "invalid_redirect_uri",
        `redirect URI '${String(u).slice(0, 200)}' is neither https nor http to 127.0.0.1/localhost, or has a fragment`,
      );
  const method = meta.token_endpoint_auth_method ?? "none";
  if (method !== "none")
    throw new OAuthError(
      "invalid_client_metadata",
      "only public clients are registered: token_endpoint_auth_method must be 'none'",
    );
  const grants = meta.grant_types ?? GRANTS;
  if (!Array.isArray(grants) || grants.some((g) => !GRANTS.includes(g)))
    throw new OAuthError("invalid_client_metadata", `grant_types may only be ${GRANTS.join(", ")}`);
  const responses = meta.response_types ?? ["code"];
  if (!Array.isArray(responses) || responses.some((r) => r !== "code"))
    throw new OAuthError("invalid_client_metadata", "response_types may only be 'code'");
  const name = typeof meta.client_name === "string" && meta.client_name.trim() ? meta.client_name.trim() : "";
  const now = Date.now();
  const id = `mcp-${randomBytes(18).toString("base64url")}`;
  await db("oauth_clients").insert({
    id,
    name: name.slice(0, 255) || id,
    redirect_uris: JSON.stringify(uris),
    registered_ip: ip.slice(0, 64),
    created_at: now,
  });
  return {
    client_id: id,
    client_id_issued_at: Math.floor(now / 1000),
    client_name: name.slice(0, 255) || id,
    redirect_uris: uris as string[],
    grant_types: GRANTS,
    response_types: ["code"],
    token_endpoint_auth_method: "none",
  };
}

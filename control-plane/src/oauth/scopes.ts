// The OAuth scopes relayctl grants (auth/roles.ts: read, deploy, exec, admin):
// what a request may ask for, what a grant records, and how the consent and
// device pages name them. A token's power is the intersection of its scopes
// and its person's role, checked per route by api/register-routes.ts.
import { html } from "../accounts/html.js";
import { DEFAULT_SCOPES, OAUTH_SCOPES, SCOPE_WORDS, parseScopes } from "../auth/roles.js";
import { OAuthError } from "./errors.js";

/**
 * The scope a request is granted, as stored and answered (space-separated, in
 * OAUTH_SCOPES order): what it asked for, or DEFAULT_SCOPES when it asked for
 * none (RFC 6749 §3.3). An unknown scope is `invalid_scope`, never dropped
 * silently: a client that asks for `read:only` must not get more than it thinks.
 */
export function grantedScope(requested: string | null | undefined): string {
  const { scopes, unknown } = parseScopes(requested);
  if (unknown.length > 0)
    throw new OAuthError(
      "invalid_scope",
      `unknown scope '${unknown[0].slice(0, 64)}': relayctl grants ${OAUTH_SCOPES.join(", ")}`,
    );
  return (scopes.length > 0 ? scopes : DEFAULT_SCOPES).join(" ");
}

/**
 * The scopes a stored grant holds. A token issued before scopes were enforced
 * (no scope, or words relayctl never granted) holds what a request without a
 * scope gets now, read and deploy: never exec or admin.
 */
export function tokenScopes(stored: string | null): string[] {
  const { scopes } = parseScopes(stored);
  return scopes.length > 0 ? scopes : [...DEFAULT_SCOPES];
}

/** The consent and device pages' list of what a grant allows, each scope in words. */
export function scopeList(scope: string) {
  const { scopes } = parseScopes(scope);
  return html`<ul class="scopes">${scopes.map((s) => html`<li><code>${s}</code>: ${SCOPE_WORDS[s]}</li>`)}</ul>
<p>Only as far as your role allows: a scope never gives more than your account may do.</p>`;
}

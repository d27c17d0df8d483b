// What a person may do: their role in the tenant, an owner's per-person grant,
// and (for an OAuth access token) the scopes the token was granted. A route's
// declaration (http/route.ts) says what it needs; api/register-routes.ts checks
// it here before the body is read. An API key (rck_) acts as an owner and an
// automation key (rca_) keeps its own operation scope: neither is a person.

/** A person's role, least powerful last: owner everything, deployer ships, viewer reads. */
export const ROLES = ["owner", "deployer", "viewer"] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { viewer: 0, deployer: 1, owner: 2 };

/**
 * A per-person grant an owner gives on top of a role: `exec` lets a deployer or
 * viewer run commands on servers and log the servers in to registries (what
 * reads the servers' secrets, hence owner-only without it).
 */
export type Grant = "exec";

/** What a route needs of a person. */
export interface Needs {
  role: Role;
  /** A grant that admits a person below `role` (the grant, not the role, then decides). */
  grant?: Grant;
}

/**
 * The OAuth scopes relayctl grants (RFC 6749 §3.3), each the power of one kind of route:
 * - `read`: every read (what a viewer may do);
 * - `deploy`: deploy, roll back, restart, read an application's logs (a deployer's);
 * - `exec`: run commands on servers, registry login and logout (an owner's, or the `exec` grant);
 * - `admin`: every other change: applications, keys, credentials, servers, people (an owner's).
 * `admin` includes `deploy` and `read`, `deploy` includes `read`; `exec` is only itself.
 * A token's power is the intersection of its scopes and its person's role.
 */
export const OAUTH_SCOPES = ["read", "deploy", "exec", "admin"] as const;
export type OAuthScope = (typeof OAUTH_SCOPES)[number];

const IMPLIED: Record<OAuthScope, readonly OAuthScope[]> = {
  read: ["read"],
  deploy: ["deploy", "read"],
  exec: ["exec"],
  admin: ["admin", "deploy", "read"],
};

/** What each scope lets a token do, in the words the consent and device pages show. */
export const SCOPE_WORDS: Record<OAuthScope, string> = {
  read: "read servers, applications, deployments, operations and the audit trail",
  deploy: "deploy, roll back and restart applications, and read their logs",
  exec: "run shell commands on servers and log them in to registries",
  admin: "change applications, keys, registry credentials, servers and people",
};

/** The scope a route needs of a token, from what it needs of a person. */
export function scopeFor(needs: Needs): OAuthScope {
  if (needs.grant === "exec") return "exec";
  return needs.role === "owner" ? "admin" : needs.role === "deployer" ? "deploy" : "read";
}

export function roleAtLeast(have: Role, need: Role): boolean {
  return RANK[have] >= RANK[need];
}

/**
 * Parses a requested or stored scope string: the known scopes in it, or the
 * unknown ones when any is unknown (an `invalid_scope` for a request).
 */
export function parseScopes(scope: string | null | undefined): { scopes: OAuthScope[]; unknown: string[] } {
  const words = (scope ?? "").split(/\s+/).filter(Boolean);
  const unknown = words.filter((w) => !(OAUTH_SCOPES as readonly string[]).includes(w));
  const scopes = OAUTH_SCOPES.filter((s) => words.includes(s));
  return { scopes, unknown };
}

/** The scopes a request without `scope` gets: a person's everyday power, never exec or admin. */
export const DEFAULT_SCOPES: readonly OAuthScope[] = ["read", "deploy"];

/**
 * Why a person may not call what `needs` says (null when they may): below the
 * role without the grant, or (an access token) without the scope.
 */
export function personRefusal(
  user: { role: Role; can_exec?: boolean },
  needs: Needs,
  tokenScopes?: readonly string[],
): string | null {
  const byGrant = needs.grant === "exec" && user.can_exec === true;
  if (!roleAtLeast(user.role, needs.role) && !byGrant)
    return needs.grant
      ? `needs the ${needs.role} role or the ${needs.grant} grant; you are a ${user.role}`
      : `needs the ${needs.role} role; you are a ${user.role}`;
  if (tokenScopes) {
    const scope = scopeFor(needs);
    const has = tokenScopes.some((s) => (IMPLIED[s as OAuthScope] ?? []).includes(scope));
    if (!has) return `needs the OAuth scope '${scope}'; this token has '${tokenScopes.join(" ")}'`;
  }
  return null;
}

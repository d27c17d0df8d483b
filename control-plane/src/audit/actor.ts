// Who did what: the actor of an audit event, as the audit log shows it on every
// row. Events written by a request carry `actor` in their payload (a person, an
// API key, an automation key, an OAuth token; accounts/users.ts userActor,
// auth/security-audit.ts actorPayload). Older or system events do not: an
// invite's acceptance names the new person, an OAuth token event its user, a
// registry credential event its key by key_id, an operation's completion its
// server's agent, a webhook GitHub. Those are read here, so a row never shows a
// blank actor and the audit log's actor filter finds them too.
import type { Knex } from "knex";

export type ActorType =
  | "user"
  | "api_key"
  | "automation_key"
  | "oauth_token"
  | "web_session"
  | "operator"
  | "agent"
  | "github"
  | "system";

export interface Actor {
  type: ActorType;
  /** A user id, a key's id, or a server id for an agent; null for the operator, GitHub and relayctl itself. */
  id: string | null;
  name: string;
}

interface EventFields {
  event_type: string;
  key_id: string | null;
  server_id: string | null;
  payload: string;
}

interface PayloadActor {
  key_id?: string;
  key_name?: string;
  key_type?: string;
  user_id?: string;
  email?: string;
}

const KEY_TYPES = new Set(["api_key", "automation_key", "oauth_token", "web_session"]);

/** The actor as far as the event itself says; `name` null when only an id is known. */
function actorRef(
  e: EventFields,
  p: Record<string, unknown>,
): { type: ActorType | null; id: string | null; name: string | null } {
  const a = p.actor as PayloadActor | undefined;
  if (a && typeof a === "object") {
    if (a.key_type === "user" || a.user_id)
      return { type: "user", id: a.user_id ?? a.key_id ?? null, name: a.email ?? a.key_name ?? null };
    if (a.key_type === "operator_cli")
      return { type: "operator", id: null, name: "server operator (relayctl-admin)" };
    if (a.key_type && KEY_TYPES.has(a.key_type))
      return { type: a.key_type as ActorType, id: a.key_id ?? null, name: a.key_name ?? null };
  }
  const type = e.event_type;
  // The person who accepted an invite (user.created with invite_id), or whose OAuth tokens these are.
  if ((type === "user.created" || type.startsWith("oauth.")) && typeof p.user_id === "string")
    return { type: "user", id: p.user_id, name: typeof p.email === "string" ? p.email : null };
  if (type === "operation.completed" || type.startsWith("agent."))
    return {
      type: "agent",
      id: e.server_id,
      name: typeof p.server_name === "string" ? `agent of ${p.server_name}` : null,
    };
  if (type.startsWith("github.")) return { type: "github", id: null, name: "GitHub" };
  if (e.key_id) return { type: null, id: e.key_id, name: typeof p.key_name === "string" ? p.key_name : null };
  return { type: "system", id: null, name: "relayctl" };
}

/** Whether `id` (a user's or a key's, lower case) is the event's actor. */
export function actorMatches(e: EventFields, id: string): boolean {
  return actorRef(e, JSON.parse(e.payload)).id?.toLowerCase() === id;
}

/**
 * The actor of each event, in order. Names the events leave out are read from
 * the tenant's users, keys and servers, one query per kind and page.
 */
export async function eventActors(db: Knex, tenantId: string, rows: EventFields[]): Promise<Actor[]> {
  const refs = rows.map((r) => actorRef(r, JSON.parse(r.payload)));
  const unnamed = [...new Set(refs.filter((r) => r.id && (!r.name || !r.type)).map((r) => r.id!))];
  const known = new Map<string, { type: ActorType; name: string }>();
  if (unnamed.length > 0) {
    const [users, apiKeys, autoKeys, servers] = await Promise.all([
      db("users").where({ tenant_id: tenantId }).whereIn("id", unnamed).select("id", "email as name"),
      db("api_keys").where({ tenant_id: tenantId }).whereIn("id", unnamed).select("id", "name"),
      db("automation_keys").where({ tenant_id: tenantId }).whereIn("id", unnamed).select("id", "name"),
      db("servers").where({ tenant_id: tenantId }).whereIn("id", unnamed).select("id", "name"),
    ]);
    for (const u of users) known.set(u.id, { type: "user", name: u.name });
    for (const k of apiKeys) known.set(k.id, { type: "api_key", name: k.name });
    for (const k of autoKeys) known.set(k.id, { type: "automation_key", name: k.name });
    for (const s of servers) known.set(s.id, { type: "agent", name: `agent of ${s.name}` });
  }
  return refs.map((r) => {
    const k = r.id ? known.get(r.id) : undefined;
    const type = r.type ?? k?.type ?? "system";
    return { type, id: r.id, name: r.name ?? k?.name ?? (r.id ? `${type} ${r.id.slice(0, 8)}` : type) };
  });
}

// The servers' API as the Servers and server pages read it (GET /api/servers,
// GET and DELETE /api/servers/{id}), beside the shared types in api.ts.
import type { Server } from "./api";

/** GET /api/servers `proxy` (the agent's ProxyStatus); null until the agent reports one. */
export interface ServerProxy {
  /** caddy, nginx, traefik or none. */
  kind: string;
  /** The proxy answered the agent's last check: deployments can switch routes. */
  ok: boolean;
  /** Where it was checked, or why it does not answer. */
  detail: string;
}

/** A server as GET /api/servers lists it. */
export interface ServerRow extends Server {
  proxy?: ServerProxy | null;
  /** When its agent's current (or last) stream opened. */
  connected_at?: string | null;
  /** When the machine booted, as its agent last said (its uptime). */
  booted_at?: string | null;
  created_at?: string | null;
}

/** One of a server's newest operations (GET /api/servers/{id} `recent_operations`). */
export interface ServerOperation {
  operation_id: string;
  operation_type: string;
  status: string;
  exit_code: number | null;
  run_id: string | null;
  started_at: string;
  completed_at: string | null;
  deployment_id: string | null;
  application_id: string | null;
  application_name: string | null;
}

/** GET /api/servers/{id}. */
export interface ServerPageData extends ServerRow {
  applications: { id: string; name: string }[];
  recent_operations: ServerOperation[];
}

export const serverPath = (id: string) => `/app/servers/${encodeURIComponent(id)}`;

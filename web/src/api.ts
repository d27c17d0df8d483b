// The one way the pages talk to the control plane: the public HTTP API with the
// session cookie. State changes carry the session's CSRF token (X-CSRF-Token);
// a 401 sends the person to sign in and back here; any other refusal becomes an
// ApiError holding the API's own `detail`, which the pages show as it is. A read
// the network cut is asked again (READ_RETRY_MS); a change never is.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

let csrfToken = "";

/** Set once from GET /api/me (the token is derived from the HttpOnly session cookie). */
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

export function signInUrl(): string {
  return `/login?next=${encodeURIComponent(location.pathname + location.search)}`;
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * Waits before a read is asked again after the network failed it (a laptop changing networks
 * cuts the requests in flight). A change is never sent again: it may have reached the control
 * plane before the answer was lost, and the page says so instead. A read still failing after
 * these is the loader's to ask again, its error shown meanwhile (ui.tsx useLoad).
 */
const READ_RETRY_MS = [250, 1000];

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (!SAFE.has(method)) headers["x-csrf-token"] = csrfToken;
  const waits = SAFE.has(method) ? READ_RETRY_MS : [];
  let res: Response | undefined;
  for (let attempt = 0; res === undefined; attempt++) {
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "same-origin",
      });
    } catch {
      const wait = waits[attempt];
      if (wait === undefined)
        throw new ApiError(0, "The control plane cannot be reached. Check your connection and try again.");
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
  if (res.status === 401) {
    location.assign(signInUrl());
    throw new ApiError(401, "Your session ended. Sign in again.");
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!res.ok) {
    const detail = (json as { detail?: unknown } | undefined)?.detail;
    throw new ApiError(
      res.status,
      typeof detail === "string" ? detail : `The request failed (HTTP ${res.status}).`,
    );
  }
  return json as T;
}

export const get = <T>(path: string) => request<T>("GET", path);
export const post = <T>(path: string, body: unknown = {}) => request<T>("POST", path, body);
export const patch = <T>(path: string, body: unknown) => request<T>("PATCH", path, body);
export const put = <T>(path: string, body: unknown) => request<T>("PUT", path, body);
export const del = (path: string) => request<void>("DELETE", path);

/** Query string from the set values only. */
export function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

// ---- resources (the fields the pages use; the contract has them all) ----

export interface Me {
  type: "user" | "api_key";
  user?: { id: string; email: string; role: "owner" | "deployer" | "viewer"; can_exec?: boolean };
  /** The routes this person may call, "METHOD /url" as the control plane declares them. */
  may?: string[];
  tenant?: { id: string; name: string };
  tenant_id?: string;
  tenant_name?: string;
  csrf_token?: string;
}

export interface Server {
  id: string;
  name: string;
  hostname: string | null;
  agent_version: string | null;
  last_seen_at: string | null;
  connected?: boolean;
  /** The container engine the agent last reported; null when it never did. */
  engine?: ServerEngine | null;
  /** Its labels, key=value pairs a fleet's placement selects servers by (docs/fleets.md). */
  labels?: Record<string, string>;
}

export interface ServerEngine {
  /** docker or podman; null when auto found none working. */
  name: string | null;
  version: string | null;
  /** Deployments and restarts can run. */
  ok: boolean;
  /** How it was chosen, or each engine's reason and how to fix it. */
  detail: string;
}

export interface Build {
  type: "dockerfile" | "image";
  dockerfile?: string;
  context?: string;
  image?: string;
  registry_credential_id?: string | null;
}

export interface Application {
  id: string;
  name: string;
  server_id: string;
  server_name?: string;
  linked_container_name: string;
  container_port: number;
  pin_port: boolean;
  fqdns: string[];
  git_repository: string | null;
  deploy_branch: string;
  build: Build | null;
  health_check_path: string;
  health_check_timeout_seconds: number;
  auto_deploy: boolean;
  /** GitHub tag pushes matching this pattern deploy; null: tags do not. */
  deploy_tags?: string | null;
  /** A push deploys only when a changed file matches one of these globs; null: every push. */
  watch_paths?: string[] | null;
  /** Fleets: the servers it runs on (a list by id or name, or a label selector); null: its server_id alone. */
  placement?: Placement;
  /** Fleets: its rollouts' default strategy; null: the defaults. */
  rollout_strategy?: RolloutStrategy | null;
  /** Its preview settings (a preview's own application has none). */
  previews?: PreviewSettings;
  /** A preview's own application: the application it previews; null or absent otherwise. */
  preview_of?: string | null;
  /** Where it is served (its default hostname, else its first domain); null when none. */
  url: string | null;
  urls: string[];
  /** Its container as the agent reports it; null until reported. */
  container?: AppContainer | null;
  /** Retention: this many newest releases keep their image for a rollback. */
  keep_releases?: number;
  /** The release serving now; null before the first deployment. */
  live_release?: Release | null;
  /** Its newest deployment whatever its outcome; null before the first. */
  last_deployment?: LastDeployment | null;
  created_at: string;
  updated_at: string;
}

export type Placement = { servers: string[] } | { selector: string } | null;

export interface RolloutStrategy {
  max_parallel?: number | string;
  max_failures?: number;
  pause_seconds?: number;
  /** 0-600: the health path answers 503 this long before each server's deployment (docs/fleets.md). */
  drain_seconds?: number;
  canary?: boolean;
  auto_rollback?: boolean;
}

export interface PreviewSettings {
  enabled: boolean;
  /** e.g. pr-{number}.{app}.preview.example.com; null: the default hostname scheme. */
  domain_pattern: string | null;
  max: number;
  allow_forks: boolean;
  copy_secrets: boolean;
  memory_mb: number | null;
  cpus: number | null;
}

/** A preview environment (GET /api/applications/{id}/previews): its own application's id. */
export interface Preview {
  id: string;
  application_id: string;
  key: string;
  number: number | null;
  name: string;
  source: "github" | "gitlab" | "gitea" | "api";
  head_ref: string;
  head_sha: string | null;
  from_fork: boolean;
  image: string | null;
  url: string | null;
  urls: string[];
  pull_request_url: string | null;
  status: "deploying" | "live" | "failed" | "removing";
  last_deployment: LastDeployment | null;
  created_at: string;
  updated_at: string;
}

export interface LastDeployment {
  deployment_id: string;
  status: string;
  commit_ref: string | null;
  commit_sha: string | null;
  created_at: string;
  finished_at: string | null;
}

/** A deployment that went live (GET .../releases, an application's live_release). */
export interface Release {
  deployment_id: string;
  live: boolean;
  image: string | null;
  image_id: string | null;
  /** Its image is still on the server: it can be rolled back to. */
  image_kept: boolean;
  config_hash: string | null;
  commit_sha: string | null;
  commit_message: string | null;
  rollback_of: string | null;
  triggered_by: { type: string; id: string | null; name: string | null };
  since: string;
  urls: string[];
  fqdns: string[];
}

export interface AppContainer {
  name: string;
  state: "running" | "restarting" | "crashed" | "stopped" | "crash_loop";
  exit_code: number | null;
  restart_count: number;
  last_crash_at: string | null;
  since: string | null;
  /** A crash loop the agent holds (podman): started again then; null when not held. */
  held_until: string | null;
  reported_at: string;
}

export interface Deployment {
  deployment_id: string;
  operation_id: string;
  status: string;
  trigger: string;
  triggered_by?: { type: string; id: string | null; name: string | null } | null;
  commit_ref: string | null;
  commit_sha: string | null;
  commit_message: string | null;
  commit_author: string | null;
  failed_step: string | null;
  error: string | null;
  /** The application's URL once this deployment serves it. */
  url?: string | null;
  created_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  steps?: Step[];
}

export interface Step {
  name: string;
  status: string;
  duration_ms: number | null;
  log: string;
}

export interface AutomationKey {
  id: string;
  name: string;
  key?: string;
  servers: string[];
  operations: string[];
  allowed_credential_ids: string[];
  ip_allowlist: string[];
  rate_limit: number;
  expires_at: string | null;
  created_at: string;
  last_used_at?: string | null;
}

export interface ApiKey {
  id: string;
  name: string;
  key?: string;
  created_at: string;
  last_used_at?: string | null;
}

export interface RegistryCredential {
  id: string;
  name: string;
  registry_url: string;
  registry_type: string;
  username: string;
  created_at: string;
}

export interface Run {
  run_id: string;
  run_context: Record<string, string> | null;
  operations: number;
  statuses: Record<string, number>;
  /** Completed operations by exit code: {"0": 3, "1": 1}. */
  exit_codes?: Record<string, number>;
  first_at: string;
  last_at: string;
}

export interface Operation {
  operation_id: string;
  operation_type: string;
  server_id: string;
  server_name: string | null;
  status: string;
  command?: string | null;
  run_id: string | null;
  run_context?: Record<string, string> | null;
  /** A deploy operation's deployment. */
  deployment?: { application_id: string; deployment_id: string } | null;
  result: { exit_code: number | null; stdout: string; stderr: string; duration_ms: number | null } | null;
  started_at: string;
  completed_at: string | null;
}

export interface User {
  id: string;
  email: string;
  role: string;
  disabled_at?: string | null;
  created_at: string;
}

export interface Session {
  id: string;
  created_at: string;
  expires_at: string;
  last_used_at: string;
  ip: string;
  /** "Chrome on Linux", from the browser's User-Agent; null when not recognised. */
  device: string | null;
  current: boolean;
}

export interface Grant {
  id: string;
  client_id: string;
  client_name: string | null;
  created_at: string;
  expires_at: string;
}

// The key scopes are the control plane's own list (one owner: operations/types.ts, which imports nothing).
export { OPERATION_SCOPES as OPERATIONS } from "../../control-plane/src/operations/types";

// HTTP calls to the control plane, the way a CI pipeline makes them.
import { pollUntil } from "./wait";

export const AUTOMATION_PREFIX = "/api/automation/v1";

export interface ApiTarget {
  baseUrl: string;
  /** Default bearer key. */
  key?: string;
}

export interface RequestOptions {
  method?: string;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as is (for malformed bodies); content type from headers. */
  rawBody?: string;
  /** Bearer key; null sends no Authorization header; undefined uses the target's key. */
  key?: string | null;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export interface ApiResponse {
  status: number;
  /** The body when it is a JSON object, else {}. */
  json: Record<string, unknown>;
  /** The parsed body whatever it is (undefined when not JSON). */
  body: unknown;
  text: string;
  headers: Headers;
  elapsedMs: number;
}

/** Requests baseUrl + path (path taken as is). */
export async function request(
  target: ApiTarget,
  path: string,
  opts: RequestOptions = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  const key = opts.key === undefined ? target.key : opts.key;
  if (key !== null && key !== undefined) headers.authorization = `Bearer ${key}`;
  let payload: string | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const started = Date.now();
  const res = await fetch(`${target.baseUrl}${path}`, {
    method: opts.method ?? (payload === undefined ? "GET" : "POST"),
    headers,
    body: payload,
    signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const json =
    body !== null && typeof body === "object" && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : {};
  return { status: res.status, json, body, text, headers: res.headers, elapsedMs: Date.now() - started };
}

/** Requests the Automation API: path is relative to /api/automation/v1. */
export function api(target: ApiTarget, path: string, opts: RequestOptions = {}): Promise<ApiResponse> {
  return request(target, `${AUTOMATION_PREFIX}${path}`, opts);
}

export interface ExecBody {
  server_id: string;
  command: string;
  working_directory?: string;
  env?: Record<string, string>;
  timeout_seconds?: number;
  run_id?: string;
  run_context?: Record<string, string>;
}

export function exec(target: ApiTarget, body: ExecBody | Record<string, unknown>, key?: string | null) {
  return api(target, "/exec", { body, key });
}

export function getOperation(target: ApiTarget, id: string): Promise<ApiResponse> {
  return api(target, `/operations/${id}`);
}

/** Polls GET /operations/{id} until its status is not `running`; returns the last answer. */
export function waitForOperationEnd(target: ApiTarget, id: string, timeoutMs: number): Promise<ApiResponse> {
  return pollUntil(
    async () => {
      const res = await getOperation(target, id);
      if (res.status !== 200) throw new Error(`GET /operations/${id}: ${res.status} ${res.text}`);
      return res.json.status === "running" ? undefined : res;
    },
    { what: `operation ${id} to leave "running"`, timeoutMs, intervalMs: 200 },
  );
}

/** Asserts nothing; returns true when the body is exactly {"detail": <string>}. */
export function isDetailOnly(res: ApiResponse): boolean {
  const keys = Object.keys(res.json);
  return (
    res.body === res.json && keys.length === 1 && keys[0] === "detail" && typeof res.json.detail === "string"
  );
}

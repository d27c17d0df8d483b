// The dashboard's side of the JSON API in system tests: a person signed in on
// /login (a real session cookie), calling /api/* with that cookie and the
// session's CSRF token from GET /api/me, as the pages' fetch wrapper does.
import type { Cluster } from "./cluster";
import type { ApiResponse } from "./http";
import { Browser } from "./people";

export interface CallOptions {
  /** The X-CSRF-Token sent; null sends none; undefined sends the session's. */
  csrf?: string | null;
  headers?: Record<string, string>;
}

export interface Dash {
  browser: Browser;
  csrf: string;
  /** The raw session cookie value (to replay it after sign-out). */
  sessionToken: string;
  call(method: string, path: string, body?: unknown, opts?: CallOptions): Promise<ApiResponse>;
}

async function cookieCall(
  browser: Browser,
  csrf: string | undefined,
  method: string,
  path: string,
  body?: unknown,
  opts: CallOptions = {},
): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  if (browser.cookies.size)
    headers.cookie = [...browser.cookies].map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("; ");
  const token = opts.csrf === undefined ? csrf : opts.csrf;
  if (token !== null && token !== undefined) headers["x-csrf-token"] = token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const started = Date.now();
  const res = await fetch(new URL(path, browser.baseUrl), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const json =
    parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : {};
  return {
    status: res.status,
    json,
    body: parsed,
    text,
    headers: res.headers,
    elapsedMs: Date.now() - started,
  };
}

/** Signs `person` in on /login and reads the session's CSRF token from GET /api/me. */
export async function signInDash(
  baseUrl: string,
  person: { email: string; password: string },
): Promise<Dash> {
  const browser = new Browser(baseUrl);
  const page = await browser.signIn(person);
  if (page.status !== 200) throw new Error(`sign-in: ${page.status}`);
  const me = await cookieCall(browser, undefined, "GET", "/api/me");
  if (me.status !== 200 || typeof me.json.csrf_token !== "string")
    throw new Error(`GET /api/me: ${me.status} ${me.text}`);
  const csrf = me.json.csrf_token;
  return {
    browser,
    csrf,
    sessionToken: browser.cookies.get("relayctl_session")!,
    call: (method, path, body, opts) => cookieCall(browser, csrf, method, path, body, opts),
  };
}

export interface AuditEvent {
  seq: number;
  key_id: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: audit payloads are free-form JSON
  payload: any;
}

/** The tenant's audit events of one type, oldest first, read from the database. */
export async function auditEvents(c: Cluster, type: string): Promise<AuditEvent[]> {
  const rows = await c.db.query(
    "SELECT seq, key_id, payload FROM audit_events WHERE tenant_id = ? AND event_type = ? ORDER BY seq",
    [c.tenantId, type],
  );
  return rows.map((r) => ({
    seq: Number(r.seq),
    key_id: r.key_id as string | null,
    payload: typeof r.payload === "string" ? JSON.parse(r.payload) : r.payload,
  }));
}

/** An invite made on `owner`'s dashboard and accepted on its page: the new person, signed in. */
export async function inviteMember(
  owner: Dash,
  role: "owner" | "deployer" | "viewer" | "member",
): Promise<Dash> {
  const email = `${role}-${Math.random().toString(36).slice(2, 8)}@example.test`;
  const r = await owner.call("POST", "/api/users/invites", { email, role });
  if (r.status !== 201) throw new Error(`invite: ${r.status} ${r.text}`);
  const password = `pw-${Math.random().toString(36).slice(2)}-long`;
  const accepted = await new Browser(owner.browser.baseUrl).post(
    new URL(String(r.json.invite_url)).pathname,
    {
      password,
    },
  );
  if (accepted.status !== 201) throw new Error(`accept: ${accepted.status}`);
  return signInDash(owner.browser.baseUrl, { email, password });
}

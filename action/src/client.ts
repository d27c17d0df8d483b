// The three external-deploy calls of the contract, over fetch. A 429 is waited
// out (Retry-After) within the call's deadline; any other non-2xx becomes an
// ApiError carrying the server's `detail`.

export interface SessionApplication {
  id: string;
  linked_container_name: string;
  container_port: number;
  bound_fqdns: string[];
}

export interface Session {
  session_id: string;
  session_token: string;
  expires_at: string;
  applications: SessionApplication[];
  unmatched: string[];
}

export interface Deployment {
  container_name: string;
  container_port: number;
  image_tag: string;
  force: boolean;
}

export interface SyncResult {
  application_id: string;
  container_name: string;
  status: "synced" | "noop" | "conflict" | "drift_recovered";
  signature_hash: string;
  synced_fqdns: string[];
  reason?: string;
}

export interface SyncError {
  container_name: string;
  reason: string;
}

export interface SyncResponse {
  session_id: string;
  results: SyncResult[];
  errors: SyncError[];
}

export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly detail: string,
    what: string,
  ) {
    super(`${what}: HTTP ${status}: ${detail}`);
  }
}

const HINTS: Record<number, string> = {
  401: "the key is invalid, revoked or expired",
  403: "the key lacks the external_deploy scope, or the caller IP is outside its allowlist",
  400: "no service matched an application's linked_container_name",
};

export class RelayctlClient {
  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs: number,
    private readonly sleep = (ms: number) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  openSession(
    apiKey: string,
    body: { container_names: string[]; workflow_run_id?: string; commit_sha?: string },
  ) {
    return this.call<Session>("POST", "/external-deploy/session", apiKey, body, "open session");
  }

  sync(sessionToken: string, deployments: Deployment[]) {
    return this.call<SyncResponse>("POST", "/external-deploy/sync", sessionToken, { deployments }, "sync");
  }

  async deleteSession(bearer: string, sessionId: string): Promise<void> {
    await this.call("DELETE", `/external-deploy/session/${sessionId}`, bearer, undefined, "delete session");
  }

  private async call<T>(
    method: string,
    path: string,
    bearer: string,
    body: unknown,
    what: string,
  ): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const res = await this.send(method, path, bearer, body, deadline, what);
      const text = await res.text();
      if (res.ok) return (text === "" ? undefined : JSON.parse(text)) as T;
      const retryAfterMs = Number(res.headers.get("retry-after") ?? "1") * 1000;
      if (res.status === 429 && Date.now() + retryAfterMs < deadline) {
        await this.sleep(retryAfterMs);
        continue;
      }
      throw new ApiError(res.status, detailOf(text, res.status), what);
    }
  }

  private async send(
    method: string,
    path: string,
    bearer: string,
    body: unknown,
    deadline: number,
    what: string,
  ) {
    try {
      return await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${bearer}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
      });
    } catch (err) {
      const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new Error(`${what}: cannot reach ${this.baseUrl}: ${cause}`, { cause: err });
    }
  }
}

function detailOf(text: string, status: number): string {
  let detail = text.slice(0, 500) || "(no body)";
  try {
    const parsed = JSON.parse(text) as { detail?: unknown };
    if (typeof parsed.detail === "string") detail = parsed.detail;
  } catch {
    // not JSON (a proxy's error page): keep the text
  }
  return HINTS[status] ? `${detail} (${HINTS[status]})` : detail;
}

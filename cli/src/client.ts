// The CLI's one way to the API. It picks the credential (--token or
// RELAYCTL_TOKEN: an rca_/rck_ key or an rco_ token; else the stored login),
// sends it the way each API takes it (Automation API: Bearer; dashboard API:
// X-API-Key for an rck_ key, Bearer for a person's token), refreshes a stored
// login's access token before it expires — and once more when the server says it
// expired — and turns every failure into a CliError with the server's detail.
import { CliError, EXIT, authError, exitForStatus } from "./errors.js";
import { type Credentials, loadCredentials, saveCredentials, withCredentialsLock } from "./credentials.js";

export interface GlobalOptions {
  url?: string;
  token?: string;
  json?: boolean;
}

export type ApiKind = "dashboard" | "automation";

/** Refresh this long before the access token's stated expiry (clock skew, slow requests), at most a tenth of its life. */
const REFRESH_MARGIN_MS = 30_000;
const marginOf = (c: Credentials) => Math.min(REFRESH_MARGIN_MS, (c.lifetime_ms ?? 0) / 10);

export const CLIENT_ID = "relayctl-cli";

export function baseUrlOf(opts: GlobalOptions, stored?: Credentials): string {
  const url = opts.url ?? process.env.RELAYCTL_URL ?? stored?.url;
  if (!url)
    throw authError("no server: pass --url or set RELAYCTL_URL (or run 'relayctl login --url <url>')");
  return url.replace(/\/+$/, "");
}

/** The error line of a failed answer: `detail`, OAuth's `error_description`, or the status. */
export function errorLine(status: number, text: string): string {
  try {
    const body = JSON.parse(text) as { detail?: string; error?: string; error_description?: string };
    if (body.detail) return body.detail;
    if (body.error) return body.error_description ? `${body.error}: ${body.error_description}` : body.error;
  } catch {
    // not JSON
  }
  return `HTTP ${status}${text ? `: ${text.slice(0, 200).trim()}` : ""}`;
}

export async function fetchOrFail(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new CliError(
      `cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? String(err)}`,
      EXIT.server,
    );
  }
}

export class Api {
  private stored: Credentials | undefined;
  readonly baseUrl: string;
  private readonly explicitToken: string | undefined;

  constructor(readonly opts: GlobalOptions) {
    this.explicitToken = opts.token ?? process.env.RELAYCTL_TOKEN ?? undefined;
    this.stored = this.explicitToken ? undefined : loadCredentials();
    this.baseUrl = baseUrlOf(opts, this.stored);
  }

  /** The credential to send now (a stored login's access token refreshed when it is about to expire). */
  bearer(): Promise<string> {
    return this.token();
  }

  /** Whether a 401 with this detail is worth one refresh and retry (a stored login whose token just expired). */
  canRefreshAfter(detail: string): boolean {
    return this.stored !== undefined && /expired/.test(detail);
  }

  private async token(): Promise<string> {
    if (this.explicitToken) return this.explicitToken;
    if (!this.stored) throw authError("not logged in: run 'relayctl login' (or pass --token)");
    if (this.stored.expires_at - marginOf(this.stored) <= Date.now()) await this.refresh();
    return this.stored.access_token;
  }

  /**
   * Trades the stored refresh token for a new pair (rotation: the old one is
   * spent), under the login's lock. Another relayctl sharing this login may have
   * rotated it since this one read it: then its new pair is taken as is (when
   * still fresh) or refreshed in turn — never the spent token presented again.
   */
  async refresh(): Promise<void> {
    if (!this.stored) throw authError("not logged in: run 'relayctl login'");
    await withCredentialsLock(async () => {
      const mine = this.stored!;
      const onDisk = loadCredentials();
      if (onDisk && onDisk.url === mine.url && onDisk.refresh_token !== mine.refresh_token) {
        this.stored = onDisk;
        if (onDisk.expires_at - marginOf(onDisk) > Date.now()) return;
      }
      await this.rotate();
    });
  }

  private async rotate(): Promise<void> {
    const s = this.stored!;
    const res = await fetchOrFail(`${s.url}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "refresh_token",
        refresh_token: s.refresh_token,
        client_id: s.client_id,
      }),
    });
    const text = await res.text();
    if (!res.ok) {
      if (res.status >= 500)
        throw new CliError(`token refresh failed: ${errorLine(res.status, text)}`, EXIT.server);
      throw authError(`your login has ended (${errorLine(res.status, text)}): run 'relayctl login'`);
    }
    const t = JSON.parse(text) as { access_token: string; refresh_token: string; expires_in: number };
    this.stored = {
      ...s,
      access_token: t.access_token,
      refresh_token: t.refresh_token,
      expires_at: Date.now() + t.expires_in * 1000,
      lifetime_ms: t.expires_in * 1000,
    };
    await saveCredentials(this.stored);
  }

  private headers(kind: ApiKind, token: string): Record<string, string> {
    if (kind === "dashboard" && token.startsWith("rck_")) return { "x-api-key": token };
    return { authorization: `Bearer ${token}` };
  }

  /** One request; the raw response (for streams) when it succeeded. */
  async raw(
    method: string,
    path: string,
    kind: ApiKind,
    body?: unknown,
    accept = "application/json",
  ): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const token = await this.token();
      const res = await fetchOrFail(`${this.baseUrl}${path}`, {
        method,
        headers: {
          accept,
          ...this.headers(kind, token),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (res.ok) return res;
      const text = await res.text();
      // The access token ran out between our check and the server's: refresh once and retry.
      if (res.status === 401 && attempt === 0 && this.stored && /expired/.test(errorLine(401, text))) {
        await this.refresh();
        continue;
      }
      throw new CliError(errorLine(res.status, text), exitForStatus(res.status));
    }
  }

  async call<T = Record<string, unknown>>(
    method: string,
    path: string,
    kind: ApiKind,
    body?: unknown,
  ): Promise<T & { _status: number }> {
    const res = await this.raw(method, path, kind, body);
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as T) : ({} as T);
    return Object.assign(parsed as object, { _status: res.status }) as T & { _status: number };
  }
}

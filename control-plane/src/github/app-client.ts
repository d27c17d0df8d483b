// The one way relayctl talks to GitHub as its App: the App JWT and installation
// tokens come from @octokit/auth-app (no hand-written JWT), requests go through
// @octokit/request against RELAYCTL_GITHUB_API_URL (GitHub Enterprise Server
// works by changing it); webhook signatures are checked as the body streams
// (webhook-route.ts). The installing user's OAuth code is exchanged
// with plain fetch (authorizingUser): its token is used for two questions and
// dropped, and fetch's errors carry no headers that could leak it into a log.
// The octokit packages are ESM-only: loaded with
// `await import()` once (DESIGN.md Facts: static imports fail under ava's tsx).
import type { GitHubAppConfig } from "../config.js";
import { RcError } from "../errors.js";

export interface GitHubRepository {
  id: number;
  full_name: string;
  default_branch: string | null;
  private: boolean;
  archived: boolean;
  clone_url: string | null;
}

export interface GitHubInstallation {
  id: number;
  account: { login: string; type: string; id?: number };
  created_at: string;
  suspended_at: string | null;
}

/** The GitHub user behind a setup URL's `code`, and whether GitHub lists the installation for them. */
export interface AuthorizingUser {
  id: number;
  login: string;
  canAccess: boolean;
}

export type CommitState = "pending" | "success" | "failure" | "error";

type RequestFn = (route: string, params?: Record<string, unknown>) => Promise<{ data: unknown }>;
type AuthFn = (o: Record<string, unknown>) => Promise<{ token: string; expiresAt?: string }>;

/** What an installation token may do: GitHub's permission names, narrowed per use (least privilege). */
export type TokenPermissions = Partial<
  Record<"contents" | "metadata" | "statuses" | "pull_requests", "read" | "write">
>;

/** GitHub's compare API lists at most this many files; a list this long may be cut. */
const COMPARE_FILE_CAP = 300;

/** A cached installation token is minted anew when it has less than this left (GitHub gives an hour). */
const TOKEN_MARGIN_MS = 5 * 60_000;

/** The repository fields relayctl keeps, from an API or webhook repository object. */
export function repositoryOf(r: Record<string, unknown>): GitHubRepository {
  return {
    id: Number(r.id),
    full_name: String(r.full_name),
    default_branch: typeof r.default_branch === "string" ? r.default_branch : null,
    private: Boolean(r.private),
    archived: Boolean(r.archived),
    clone_url: typeof r.clone_url === "string" ? r.clone_url : null,
  };
}

/** How long one call to GitHub's API may take. */
const GITHUB_TIMEOUT_MS = 15_000;

export class GitHubApp {
  /** Installation tokens by installation, repository and permissions, until shortly before they expire. */
  private readonly tokens = new Map<string, { token: string; expiresAt: number }>();

  private constructor(
    readonly config: GitHubAppConfig,
    /** Requests as the App (JWT, through auth-app's hook): /app/... routes. */
    private readonly asApp: RequestFn,
    /** Requests with an installation token the caller puts in `authorization`. */
    private readonly request: RequestFn,
    private readonly auth: AuthFn & { hook: unknown },
  ) {}

  static async create(config: GitHubAppConfig): Promise<GitHubApp> {
    const [{ request }, { createAppAuth }] = await Promise.all([
      import("@octokit/request"),
      import("@octokit/auth-app"),
    ]);
    const base = request.defaults({
      baseUrl: config.apiUrl,
      headers: { "user-agent": `relayctl-github-app/${config.slug}` },
      // Every call to GitHub ends within 15 s: one that stalls must not hold up the
      // delivery processor (statuses are reported from its loop) for longer.
      request: {
        fetch: (url: string | URL, init?: RequestInit) =>
          fetch(url, { ...init, signal: init?.signal ?? AbortSignal.timeout(GITHUB_TIMEOUT_MS) }),
      },
    });
    const auth = createAppAuth({ appId: config.appId, privateKey: config.privateKey, request: base });
    const authed = base.defaults({ request: { hook: auth.hook } });
    return new GitHubApp(
      config,
      authed as unknown as RequestFn,
      base as unknown as RequestFn,
      auth as unknown as AuthFn & { hook: unknown },
    );
  }

  /** GET /app/installations/{id} with the App JWT; undefined when GitHub does not know it. */
  async installation(id: number): Promise<GitHubInstallation | undefined> {
    try {
      const { data } = await this.asApp("GET /app/installations/{installation_id}", {
        installation_id: id,
      });
      return data as GitHubInstallation;
    } catch (err) {
      if ((err as { status?: number }).status === 404) return undefined;
      throw apiError("reading the installation", err);
    }
  }

  /**
   * Who the GitHub user who came back to the setup URL with `code` is, and
   * whether they can access the installation: the code is exchanged (POST
   * {web}/login/oauth/access_token, the App's client id and secret) for a
   * user-to-server token, which reads the user (GET /user) and lists that
   * user's installations of this App (GET /user/installations). The token is
   * used for these questions only: never stored, logged or returned.
   * Undefined for a code GitHub refuses (unknown, expired or used).
   */
  async authorizingUser(code: string, installationId: number): Promise<AuthorizingUser | undefined> {
    const ua = { "user-agent": `relayctl-github-app/${this.config.slug}` };
    const exchanged = await fetch(`${this.config.webUrl}/login/oauth/access_token`, {
      method: "POST",
      headers: { ...ua, accept: "application/json", "content-type": "application/json" },
      body: JSON.stringify({
        client_id: this.config.clientId,
        client_secret: this.config.clientSecret,
        code,
      }),
      signal: AbortSignal.timeout(15_000),
    }).catch((err) => {
      throw apiError("exchanging the authorization code", err);
    });
    // GitHub answers a refused code with 200 and {error}; a 4xx is treated alike.
    const grant = (await exchanged.json().catch(() => ({}))) as { access_token?: unknown; error?: unknown };
    if (exchanged.status >= 500)
      throw apiError("exchanging the authorization code", { status: exchanged.status });
    if (typeof grant.access_token !== "string" || !grant.access_token) return undefined;
    const token = grant.access_token;
    const asUser = async (path: string, what: string) => {
      const res = await fetch(`${this.config.apiUrl}${path}`, {
        headers: {
          ...ua,
          accept: "application/vnd.github+json",
          authorization: `Bearer ${token}`,
          "x-github-api-version": "2022-11-28",
        },
        signal: AbortSignal.timeout(15_000),
      }).catch((err) => {
        throw apiError(what, err);
      });
      if (!res.ok) throw apiError(what, { status: res.status });
      return res.json() as Promise<Record<string, unknown>>;
    };
    const me = await asUser("/user", "reading the authorizing user");
    const user = { id: Number(me.id), login: String(me.login ?? ""), canAccess: false };
    for (let page = 1; page <= 50; page++) {
      const body = (await asUser(
        `/user/installations?per_page=100&page=${page}`,
        "listing the user's installations",
      )) as { total_count?: number; installations?: { id: number }[] };
      const list = body.installations ?? [];
      if (list.some((i) => Number(i.id) === installationId)) return { ...user, canAccess: true };
      if (list.length < 100 || page * 100 >= Number(body.total_count ?? 0)) break;
    }
    return user;
  }

  /**
   * An installation access token for `repositoryId` with only `permissions`,
   * reused until a few minutes before GitHub makes it expire (an hour): one mint
   * per (installation, repository, permissions) an hour, not one per status.
   * `fresh`: mint anew (and keep it for the others): a deployment's fetch may
   * wait in the queue up to its deadline (up to an hour), so it gets a whole
   * hour. Cached in this process only; never in a table or log.
   */
  async installationToken(
    installationId: number,
    repositoryId: number,
    permissions: TokenPermissions,
    fresh = false,
  ): Promise<string> {
    const key = `${installationId}:${repositoryId}:${JSON.stringify(permissions)}`;
    const cached = this.tokens.get(key);
    if (!fresh && cached && cached.expiresAt - Date.now() > TOKEN_MARGIN_MS) return cached.token;
    try {
      const { token, expiresAt } = await this.auth({
        type: "installation",
        installationId,
        // Ours is the cache (with its margin); auth-app's own would keep a token to its last minute.
        refresh: true,
        repositoryIds: [repositoryId],
        permissions,
      });
      // A token without a readable expiry is used once rather than trusted for an hour.
      const expires = Date.parse(String(expiresAt));
      if (Number.isFinite(expires)) this.tokens.set(key, { token, expiresAt: expires });
      return token;
    } catch (err) {
      throw apiError("minting an installation token", err);
    }
  }

  /** Forgets the tokens of an installation GitHub no longer honours (401: revoked, uninstalled). */
  private forgetTokens(installationId: number): void {
    for (const k of this.tokens.keys()) if (k.startsWith(`${installationId}:`)) this.tokens.delete(k);
  }

  /** GET /repositories/{id} as the installation. */
  async repository(installationId: number, repositoryId: number): Promise<GitHubRepository | undefined> {
    try {
      const token = await this.installationToken(installationId, repositoryId, { metadata: "read" });
      const { data } = await this.request("GET /repositories/{id}", {
        id: repositoryId,
        headers: { authorization: `token ${token}` },
      });
      return repositoryOf(data as Record<string, unknown>);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 401) this.forgetTokens(installationId);
      if (status === 404 || status === 403) return undefined;
      throw err instanceof RcError ? err : apiError("reading the repository", err);
    }
  }

  /**
   * The files changed between two commits (GET /repos/{owner}/{repo}/compare/{base}...{head},
   * a token that may read contents): for a push whose payload lists too few.
   * `complete` is false when GitHub capped the list (it shows at most 300 files).
   */
  async changedFiles(
    installationId: number,
    repositoryId: number,
    fullName: string,
    base: string,
    head: string,
  ): Promise<{ files: string[]; complete: boolean }> {
    const [owner, repo] = fullName.split("/");
    const token = await this.installationToken(installationId, repositoryId, { contents: "read" });
    try {
      const { data } = await this.request("GET /repos/{owner}/{repo}/compare/{basehead}", {
        owner,
        repo,
        basehead: `${base}...${head}`,
        headers: { authorization: `token ${token}` },
      });
      const list = ((data as { files?: { filename?: unknown; previous_filename?: unknown }[] }).files ??
        []) as { filename?: unknown; previous_filename?: unknown }[];
      const files = list.flatMap((f) =>
        [f.filename, f.previous_filename].filter((n): n is string => typeof n === "string"),
      );
      return { files, complete: list.length < COMPARE_FILE_CAP };
    } catch (err) {
      if ((err as { status?: number }).status === 401) this.forgetTokens(installationId);
      throw apiError("comparing the pushed commits", err);
    }
  }

  /**
   * POST /repos/{owner}/{repo}/statuses/{sha} as the installation, with a token
   * that may write statuses on that one repository and do nothing else.
   */
  async createStatus(
    installationId: number,
    repositoryId: number,
    fullName: string,
    sha: string,
    status: { state: CommitState; context: string; description: string; target_url?: string },
  ): Promise<void> {
    const [owner, repo] = fullName.split("/");
    const token = await this.installationToken(installationId, repositoryId, { statuses: "write" });
    try {
      await this.request("POST /repos/{owner}/{repo}/statuses/{sha}", {
        owner,
        repo,
        sha,
        ...status,
        description: status.description.slice(0, 140),
        headers: { authorization: `token ${token}` },
      });
    } catch (err) {
      if ((err as { status?: number }).status === 401) this.forgetTokens(installationId);
      throw apiError("reporting a commit status", err);
    }
  }

  /**
   * A preview's one pull request comment (previews): created once, then edited in
   * place (`commentId`), with a token that may write pull requests on that one
   * repository. Returns the comment's id. A comment deleted on GitHub (404 on the
   * edit) is created again.
   */
  async upsertComment(
    installationId: number,
    repositoryId: number,
    fullName: string,
    number: number,
    commentId: number | null,
    body: string,
  ): Promise<number> {
    const [owner, repo] = fullName.split("/");
    const token = await this.installationToken(installationId, repositoryId, { pull_requests: "write" });
    const headers = { authorization: `token ${token}` };
    try {
      if (commentId !== null) {
        try {
          await this.request("PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}", {
            owner,
            repo,
            comment_id: commentId,
            body,
            headers,
          });
          return commentId;
        } catch (err) {
          if ((err as { status?: number }).status !== 404) throw err;
        }
      }
      const { data } = await this.request("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", {
        owner,
        repo,
        issue_number: number,
        body,
        headers,
      });
      return Number((data as { id: number }).id);
    } catch (err) {
      throw apiError("writing the pull request comment", err);
    }
  }
}

function apiError(what: string, err: unknown): RcError {
  const status = (err as { status?: number }).status;
  return new RcError("RC_ERR_GITHUB_API", `GitHub's API failed ${what}${status ? ` (HTTP ${status})` : ""}`, {
    cause: err,
  });
}

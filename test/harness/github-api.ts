// A stand-in for GitHub's REST API (GitHub is outside this machine's reach),
// following GitHub's documented contract for the endpoints relayctl calls as
// its App:
//   GET  /app/installations/{id}                  App JWT (RS256, iss = App id, exp ≤ 10 min)
//   POST /app/installations/{id}/access_tokens    App JWT → 201 {token, expires_at, ...}
//   GET  /repositories/{id}                       installation token
//   POST /repos/{owner}/{repo}/statuses/{sha}     installation token → 201
//   POST /repos/{owner}/{repo}/issues/{n}/comments, PATCH …/issues/comments/{id}
//                                    installation token with pull_requests (or issues) write
//   GET  /repos/{owner}/{repo}/compare/{base}...{head}  installation token (contents: read) →
//                                    {status, total_commits, files: [{filename, status}]}, at most
//                                    300 files as GitHub; the files come from `diff` (the test's git)
// and the user authorization the setup URL needs:
//   POST /login/oauth/access_token   {client_id, client_secret, code} → {access_token} (JSON
//                                    with Accept: application/json; a refused code or client is
//                                    200 {error}, as GitHub does); codes come from issueCode,
//                                    single use
//   GET  /user                       user token → {login, id} (ids from userId)
//   GET  /user/installations         user token → {total_count, installations} (per_page, page):
//                                    the installations `users` says that user can access
// The App JWT is checked against the test key's public half, so a client that
// signs badly (or with another key) gets GitHub's 401. Tokens are random per
// mint, valid only for their installation, the repositories asked for and the
// permissions asked for (GitHub's `permissions` body: none asked means all the
// installation has; one it lacks is 422; a status post without `statuses: write`
// is 403 "Resource not accessible by integration"), and `acceptsToken` lets a
// git host accept exactly the minted ones that may read contents.
import { createPublicKey, generateKeyPairSync, randomBytes, verify } from "node:crypto";
import { writeFileSync } from "node:fs";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { join } from "node:path";
import { makeTempDir, onCleanup } from "./cleanup";
import { listenOnFreePort } from "./ports";

export interface StandInRepository {
  id: number;
  full_name: string;
  default_branch: string;
  private: boolean;
  clone_url: string;
}

export interface StandInInstallation {
  id: number;
  /** A personal account's id is its user's (userId); an organisation's defaults to id × 10. */
  account: { login: string; type: string; id?: number };
  created_at: string;
  repositories: number[];
}

export interface PostedStatus {
  full_name: string;
  sha: string;
  state: string;
  description: string;
  target_url?: string;
  context: string;
}

export interface MintedToken {
  token: string;
  installationId: number;
  repositoryIds?: number[];
  /** What the token may do (what was asked, or all the installation's permissions). */
  permissions: Record<string, string>;
  /** Whether the mint asked for `permissions` at all. */
  narrowed: boolean;
}

/** The permissions every stand-in installation grants (the App's registration in docs/github-app.md). */
const INSTALLATION_PERMISSIONS: Record<string, string> = {
  contents: "read",
  statuses: "write",
  metadata: "read",
  pull_requests: "write",
};
const LEVEL: Record<string, number> = { read: 1, write: 2 };

export interface GitHubApiStandIn {
  url: string;
  appId: string;
  /** Path of the App's private key (PEM), for RELAYCTL_GITHUB_PRIVATE_KEY_FILE. */
  privateKeyFile: string;
  installations: Map<number, StandInInstallation>;
  repositories: Map<number, StandInRepository>;
  statuses: PostedStatus[];
  /** Pull request comments as they are now (a PATCH edits one in place), and how many POSTs and PATCHes came. */
  comments: { id: number; full_name: string; number: number; body: string; edits: number }[];
  /** Every token minted, in order, with what it was asked for (absent: everything). */
  minted: MintedToken[];
  /** What the compare API answers: the files changed from base to head of a repository (git diff). */
  diff?: (fullName: string, base: string, head: string) => string[] | undefined;
  /** Every compare asked, as `full_name base...head`. */
  compared: string[];
  /** Requests refused for a bad App JWT or token. */
  refused: string[];
  acceptsToken(token: string): boolean;
  /** The App's OAuth client, for RELAYCTL_GITHUB_CLIENT_ID / _CLIENT_SECRET. */
  clientId: string;
  clientSecret: string;
  /** GitHub users (login) and the installation ids each can access. */
  users: Map<string, number[]>;
  /** GitHub's numeric id of the user `login` (stable; the `sender.id` of their deliveries). */
  userId(login: string): number;
  /** A fresh authorization code for `login`, as GitHub hands the setup URL. */
  issueCode(login: string): string;
  /** Every user-to-server token handed out, in order. */
  userTokens: string[];
  stop(): Promise<void>;
}

function b64json(part: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
}

export async function startGitHubApi(appId = "424242"): Promise<GitHubApiStandIn> {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const privateKeyFile = join(makeTempDir("gh-app"), "app.pem");
  writeFileSync(privateKeyFile, privateKey.export({ type: "pkcs1", format: "pem" }), { mode: 0o600 });
  const pub = createPublicKey(publicKey.export({ type: "spki", format: "pem" }));
  const installations = new Map<number, StandInInstallation>();
  const repositories = new Map<number, StandInRepository>();
  const statuses: PostedStatus[] = [];
  const comments: GitHubApiStandIn["comments"] = [];
  const minted: MintedToken[] = [];
  const refused: string[] = [];
  const compared: string[] = [];
  const clientId = `Iv1.${randomBytes(8).toString("hex")}`;
  const clientSecret = randomBytes(20).toString("hex");
  const users = new Map<string, number[]>();
  const codes = new Map<string, string>();
  const userTokenOwner = new Map<string, string>();
  const userTokens: string[] = [];
  const userIds = new Map<string, number>();
  const userId = (login: string) => {
    if (!userIds.has(login)) userIds.set(login, 583231 + userIds.size);
    return userIds.get(login)!;
  };

  const appJwtOk = (req: IncomingMessage): boolean => {
    const m = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/i.exec(req.headers.authorization ?? "");
    if (!m) return false;
    const header = b64json(m[1]!);
    const claims = b64json(m[2]!);
    if (header?.alg !== "RS256" || !claims) return false;
    const signed = verify("RSA-SHA256", Buffer.from(`${m[1]}.${m[2]}`), pub, Buffer.from(m[3]!, "base64url"));
    const now = Math.floor(Date.now() / 1000);
    const exp = Number(claims.exp);
    const iat = Number(claims.iat);
    return signed && String(claims.iss) === appId && exp > now && exp - iat <= 600 && iat <= now + 60;
  };
  const tokenOf = (req: IncomingMessage) => {
    const m = /^(?:token|Bearer) (ghs_\w+)$/i.exec(req.headers.authorization ?? "");
    return m ? minted.find((t) => t.token === m[1]) : undefined;
  };
  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
    res.end(JSON.stringify(body));
  };
  const unauthorized = (req: IncomingMessage, res: ServerResponse) => {
    refused.push(`${req.method} ${req.url}`);
    send(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" });
  };
  const notFound = (res: ServerResponse) => send(res, 404, { message: "Not Found" });
  const installationView = (i: StandInInstallation) => ({
    id: i.id,
    account: { login: i.account.login, type: i.account.type, id: i.account.id ?? i.id * 10 },
    app_id: Number(appId),
    target_type: i.account.type,
    created_at: i.created_at,
    suspended_at: null,
    permissions: INSTALLATION_PERMISSIONS,
  });

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const body = !raw
        ? {}
        : /x-www-form-urlencoded/.test(req.headers["content-type"] ?? "")
          ? Object.fromEntries(new URLSearchParams(raw))
          : JSON.parse(raw);
      const url = new URL(req.url ?? "/", "http://x");
      const path = url.pathname;
      let m: RegExpExecArray | null;
      if (req.method === "POST" && path === "/login/oauth/access_token") {
        if (!/application\/json/.test(req.headers.accept ?? ""))
          return send(res, 406, { message: "this stand-in answers JSON only" });
        if (body.client_id !== clientId || body.client_secret !== clientSecret)
          return send(res, 200, { error: "incorrect_client_credentials" });
        const login = codes.get(String(body.code));
        codes.delete(String(body.code));
        if (!login) return send(res, 200, { error: "bad_verification_code" });
        const token = `ghu_${randomBytes(18).toString("hex")}`;
        userTokenOwner.set(token, login);
        userTokens.push(token);
        return send(res, 200, { access_token: token, token_type: "bearer", scope: "" });
      }
      if (req.method === "GET" && path === "/user") {
        const t = /^(?:token|Bearer) (ghu_\w+)$/i.exec(req.headers.authorization ?? "");
        const login = t ? userTokenOwner.get(t[1]!) : undefined;
        if (!login) return unauthorized(req, res);
        return send(res, 200, { login, id: userId(login), type: "User" });
      }
      if (req.method === "GET" && path === "/user/installations") {
        const t = /^(?:token|Bearer) (ghu_\w+)$/i.exec(req.headers.authorization ?? "");
        const login = t ? userTokenOwner.get(t[1]!) : undefined;
        if (!login) return unauthorized(req, res);
        const mine = (users.get(login) ?? []).flatMap((id) => {
          const i = installations.get(id);
          return i ? [installationView(i)] : [];
        });
        const perPage = Math.min(100, Number(url.searchParams.get("per_page") ?? 30));
        const page = Number(url.searchParams.get("page") ?? 1);
        return send(res, 200, {
          total_count: mine.length,
          installations: mine.slice((page - 1) * perPage, page * perPage),
        });
      }
      m = req.method === "GET" ? /^\/app\/installations\/(\d+)$/.exec(path) : null;
      if (m) {
        if (!appJwtOk(req)) return unauthorized(req, res);
        const i = installations.get(Number(m[1]));
        return i ? send(res, 200, installationView(i)) : notFound(res);
      }
      m = req.method === "POST" ? /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path) : null;
      if (m) {
        if (!appJwtOk(req)) return unauthorized(req, res);
        const i = installations.get(Number(m[1]));
        if (!i) return notFound(res);
        const asked = (body.repository_ids ?? []) as number[];
        if (asked.some((id) => !i.repositories.includes(id)))
          return send(res, 422, {
            message:
              "There is at least one repository that does not exist or is not accessible to the parent installation.",
          });
        const narrowed = body.permissions !== undefined;
        const permissions = (body.permissions ?? INSTALLATION_PERMISSIONS) as Record<string, string>;
        const beyond = Object.entries(permissions).find(
          ([name, level]) =>
            !(LEVEL[level] && LEVEL[level]! <= (LEVEL[INSTALLATION_PERMISSIONS[name] ?? ""] ?? 0)),
        );
        if (beyond)
          return send(res, 422, {
            message: `The permissions requested are not granted to this installation: ${beyond[0]}`,
          });
        const token = `ghs_${randomBytes(18).toString("hex")}`;
        minted.push({
          token,
          installationId: i.id,
          repositoryIds: asked.length ? asked : undefined,
          permissions: { metadata: "read", ...permissions },
          narrowed,
        });
        return send(res, 201, {
          token,
          expires_at: new Date(Date.now() + 3600_000).toISOString(),
          permissions: { metadata: "read", ...permissions },
          repository_selection: asked.length ? "selected" : "all",
        });
      }
      m = req.method === "GET" ? /^\/repositories\/(\d+)$/.exec(path) : null;
      if (m) {
        const t = tokenOf(req);
        if (!t) return unauthorized(req, res);
        const id = Number(m[1]);
        const r = repositories.get(id);
        const i = installations.get(t.installationId);
        if (!r || !i?.repositories.includes(id) || (t.repositoryIds && !t.repositoryIds.includes(id)))
          return notFound(res);
        return send(res, 200, {
          ...r,
          name: r.full_name.split("/")[1],
          owner: { login: r.full_name.split("/")[0] },
          archived: false,
        });
      }
      m =
        req.method === "GET"
          ? /^\/repos\/([^/]+)\/([^/]+)\/compare\/([0-9a-f]{40})\.\.\.([0-9a-f]{40})$/.exec(path)
          : null;
      if (m) {
        const t = tokenOf(req);
        if (!t) return unauthorized(req, res);
        const full = `${m[1]}/${m[2]}`;
        const r = [...repositories.values()].find((x) => x.full_name === full);
        if (
          !r ||
          !installations.get(t.installationId)?.repositories.includes(r.id) ||
          (t.repositoryIds && !t.repositoryIds.includes(r.id))
        )
          return notFound(res);
        if (!LEVEL[t.permissions.contents ?? ""])
          return send(res, 403, { message: "Resource not accessible by integration" });
        compared.push(`${full} ${m[3]}...${m[4]}`);
        const files = api.diff?.(full, m[3]!, m[4]!);
        if (!files) return notFound(res);
        return send(res, 200, {
          status: "ahead",
          total_commits: 1,
          files: files.slice(0, 300).map((filename) => ({ filename, status: "modified" })),
        });
      }
      m = req.method === "POST" ? /^\/repos\/([^/]+)\/([^/]+)\/statuses\/([0-9a-f]{40})$/.exec(path) : null;
      if (m) {
        const t = tokenOf(req);
        if (!t) return unauthorized(req, res);
        const full = `${m[1]}/${m[2]}`;
        const r = [...repositories.values()].find((x) => x.full_name === full);
        if (
          !r ||
          !installations.get(t.installationId)?.repositories.includes(r.id) ||
          (t.repositoryIds && !t.repositoryIds.includes(r.id))
        )
          return notFound(res);
        if (t.permissions.statuses !== "write")
          return send(res, 403, { message: "Resource not accessible by integration" });
        if (!["error", "failure", "pending", "success"].includes(body.state))
          return send(res, 422, { message: "Validation Failed" });
        statuses.push({ full_name: full, sha: m[3]!, ...body });
        return send(res, 201, { id: statuses.length, state: body.state, context: body.context ?? "default" });
      }
      // Pull request comments (previews): POST a new one, PATCH one by its id.
      m =
        req.method === "POST"
          ? /^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(path)
          : req.method === "PATCH"
            ? /^\/repos\/([^/]+)\/([^/]+)\/issues\/comments\/(\d+)$/.exec(path)
            : null;
      if (m) {
        const t = tokenOf(req);
        if (!t) return unauthorized(req, res);
        const full = `${m[1]}/${m[2]}`;
        const r = [...repositories.values()].find((x) => x.full_name === full);
        if (
          !r ||
          !installations.get(t.installationId)?.repositories.includes(r.id) ||
          (t.repositoryIds && !t.repositoryIds.includes(r.id))
        )
          return notFound(res);
        if (t.permissions.pull_requests !== "write" && t.permissions.issues !== "write")
          return send(res, 403, { message: "Resource not accessible by integration" });
        if (typeof body.body !== "string" || body.body.length === 0)
          return send(res, 422, { message: "Validation Failed" });
        if (req.method === "POST") {
          const c = {
            id: 9000 + comments.length,
            full_name: full,
            number: Number(m[3]),
            body: body.body,
            edits: 0,
          };
          comments.push(c);
          return send(res, 201, { id: c.id, body: c.body });
        }
        const c = comments.find((x) => x.id === Number(m![3]) && x.full_name === full);
        if (!c) return notFound(res);
        c.body = body.body;
        c.edits++;
        return send(res, 200, { id: c.id, body: c.body });
      }
      notFound(res);
    });
  });
  const port = await listenOnFreePort(server);
  const stop = () => new Promise<void>((resolve) => server.close(() => resolve()));
  onCleanup(stop);
  const api: GitHubApiStandIn = {
    url: `http://127.0.0.1:${port}`,
    appId,
    privateKeyFile,
    installations,
    repositories,
    statuses,
    comments,
    minted,
    refused,
    acceptsToken: (token) => minted.some((t) => t.token === token && LEVEL[t.permissions.contents ?? ""]),
    clientId,
    clientSecret,
    users,
    userId,
    issueCode: (login) => {
      const code = randomBytes(10).toString("hex");
      codes.set(code, login);
      return code;
    },
    userTokens,
    compared,
    stop,
  };
  return api;
}

/** The control plane's settings for the App the stand-in plays (webhooks signed with `webhookSecret`). */
export function githubAppEnv(gh: GitHubApiStandIn, webhookSecret: string): Record<string, string> {
  return {
    RELAYCTL_GITHUB_APP_ID: gh.appId,
    RELAYCTL_GITHUB_APP_SLUG: "relayctl-test",
    RELAYCTL_GITHUB_PRIVATE_KEY_FILE: gh.privateKeyFile,
    RELAYCTL_GITHUB_WEBHOOK_SECRET: webhookSecret,
    RELAYCTL_GITHUB_CLIENT_ID: gh.clientId,
    RELAYCTL_GITHUB_CLIENT_SECRET: gh.clientSecret,
    RELAYCTL_GITHUB_API_URL: gh.url,
    RELAYCTL_GITHUB_WEB_URL: gh.url,
    RELAYCTL_PUBLIC_URL: "https://relayctl.example",
  };
}

// A stand-in GitLab or Gitea/Forgejo for the forge tests: one local HTTP server
// that answers the documented commit-status APIs and, on every other path,
// serves the repositories under `root` over git's smart HTTP (git-http.ts's
// CGI), as the forge serves `<base>/<group>/<repo>.git`. It accepts only the
// project token it was given, the way each forge takes it:
//   GitLab  POST /api/v4/projects/{id or url-encoded path}/statuses/{sha}, PRIVATE-TOKEN
//           GET  /api/v4/projects/{id}: path_with_namespace, http_url_to_repo
//           POST /api/v4/projects/{id}/merge_requests/{iid}/notes {body} → 201 {id, body}
//           PUT  /api/v4/projects/{id}/merge_requests/{iid}/notes/{note_id} {body} → 200
//   Gitea   POST /api/v1/repos/{owner}/{repo}/statuses/{sha}, Authorization: token …
//           POST /api/v1/repos/{owner}/{repo}/issues/{index}/comments {body} → 201 {id, body}
//           PATCH /api/v1/repos/{owner}/{repo}/issues/comments/{id} {body} → 200
//   git     Basic auth with the token as the password (any user name)
// Every status posted is recorded (with the token it came with) for the test to
// read, and so is every comment write, beside each comment's current text.
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { onCleanup } from "./cleanup";
import { type GitHttpRequest, serveCgi } from "./git-http";
import { listenOnFreePort } from "./ports";

export interface PostedStatus {
  project: string;
  sha: string;
  token: string | undefined;
  /** GitLab's `name` or Gitea's `context`. */
  context: string;
  state: string;
  description: string;
  target_url: string | undefined;
}

/** A merge/pull request comment as the forge holds it now. */
export interface StoredComment {
  id: number;
  project: string;
  /** GitLab's merge request iid or Gitea's issue index. */
  number: number;
  body: string;
}

/** One comment API call: a creation (POST) or an edit (PUT on GitLab, PATCH on Gitea). */
export interface CommentWrite {
  method: string;
  id: number;
  token: string | undefined;
}

export interface ForgeStandIn {
  url: string;
  statuses: PostedStatus[];
  /** Git requests, with whether their credentials were right. */
  gitRequests: GitHttpRequest[];
  /** GitLab numeric project ids the API answers for. */
  projectIds: Map<number, string>;
  /** The next n status posts are answered 503 (a forge having a bad moment). */
  failStatuses(n: number): void;
  /** How many status posts were answered 503 so far. */
  refusedStatuses(): number;
  comments: StoredComment[];
  commentWrites: CommentWrite[];
  /** The next n comment writes are answered 503. */
  failComments(n: number): void;
}

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let s = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => {
      s += c;
    });
    req.on("end", () => resolve(s));
    req.on("error", reject);
  });

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

export async function startForgeStandIn(
  kind: "gitlab" | "gitea",
  root: string,
  token: string,
): Promise<ForgeStandIn> {
  const statuses: PostedStatus[] = [];
  const gitRequests: GitHttpRequest[] = [];
  const projectIds = new Map<number, string>();
  let failing = 0;
  let refused = 0;
  const comments: StoredComment[] = [];
  const commentWrites: CommentWrite[] = [];
  let failingComments = 0;
  let url = "";

  const statusRoute =
    kind === "gitlab"
      ? /^\/api\/v4\/projects\/([^/]+)\/statuses\/([0-9a-f]{40})$/
      : /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/statuses\/([0-9a-f]{40})$/;

  /** A comment route: its project, request number (absent on Gitea's edit) and comment id (absent on a creation). */
  const commentRoute = (method: string, path: string) => {
    if (kind === "gitlab") {
      const m = /^\/api\/v4\/projects\/([^/]+)\/merge_requests\/(\d+)\/notes(?:\/(\d+))?$/.exec(path);
      if (!m || method !== (m[3] ? "PUT" : "POST")) return undefined;
      return {
        project: decodeURIComponent(m[1]!),
        number: Number(m[2]),
        id: m[3] ? Number(m[3]) : undefined,
      };
    }
    const created = /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/.exec(path);
    if (created && method === "POST")
      return { project: `${created[1]}/${created[2]}`, number: Number(created[3]), id: undefined };
    const edited = /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/issues\/comments\/(\d+)$/.exec(path);
    if (edited && method === "PATCH")
      return { project: `${edited[1]}/${edited[2]}`, number: undefined, id: Number(edited[3]) };
    return undefined;
  };

  const api = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    const given =
      kind === "gitlab"
        ? (req.headers["private-token"] as string | undefined)
        : /^token (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (given !== token) return json(res, 401, { message: "401 Unauthorized" });
    const project = kind === "gitlab" ? /^\/api\/v4\/projects\/(\d+)$/.exec(path) : null;
    if (req.method === "GET" && project) {
      const p = projectIds.get(Number(project[1]));
      if (!p) return json(res, 404, { message: "404 Project Not Found" });
      return json(res, 200, {
        id: Number(project[1]),
        path_with_namespace: p,
        http_url_to_repo: `${url}/${p}.git`,
      });
    }
    const note = commentRoute(req.method ?? "", path);
    if (note) {
      const body = JSON.parse((await readBody(req)) || "{}") as { body?: unknown };
      if (typeof body.body !== "string" || body.body === "")
        return json(res, 400, { message: "body is missing" });
      if (failingComments > 0) {
        failingComments--;
        return json(res, 503, { message: "busy" });
      }
      if (note.id === undefined) {
        const c: StoredComment = {
          id: 900 + comments.length,
          project: note.project,
          number: note.number!,
          body: body.body,
        };
        comments.push(c);
        commentWrites.push({ method: "POST", id: c.id, token: given });
        return json(res, 201, { id: c.id, body: c.body });
      }
      const c = comments.find(
        (x) =>
          x.id === note.id &&
          x.project === note.project &&
          (note.number === undefined || x.number === note.number),
      );
      if (!c) return json(res, 404, { message: "404 Not found" });
      c.body = body.body;
      commentWrites.push({ method: req.method ?? "", id: c.id, token: given });
      return json(res, 200, { id: c.id, body: c.body });
    }
    const m = statusRoute.exec(path);
    if (req.method !== "POST" || !m) return json(res, 404, { message: "404 Not Found" });
    const body = JSON.parse((await readBody(req)) || "{}") as Record<string, string>;
    if (failing > 0) {
      failing--;
      refused++;
      return json(res, 503, { message: "busy" });
    }
    const s: PostedStatus = {
      project: kind === "gitlab" ? decodeURIComponent(m[1]!) : `${m[1]}/${m[2]}`,
      sha: kind === "gitlab" ? m[2]! : m[3]!,
      token: given,
      context: (kind === "gitlab" ? body.name : body.context) ?? "",
      state: body.state ?? "",
      description: body.description ?? "",
      target_url: body.target_url,
    };
    statuses.push(s);
    return json(res, 201, { id: statuses.length, ...body });
  };

  const authorized = (req: IncomingMessage) => {
    const m = /^Basic (.+)$/.exec(req.headers.authorization ?? "");
    if (!m) return false;
    const text = Buffer.from(m[1]!, "base64").toString("utf8");
    return text.slice(text.indexOf(":") + 1) === token;
  };

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    if (path.startsWith("/api/")) {
      api(req, res, path).catch((err: Error) => json(res, 500, { message: err.message }));
      return;
    }
    const ok = authorized(req);
    const log: GitHttpRequest = {
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      authorized: ok,
      status: 401,
    };
    gitRequests.push(log);
    if (!ok) {
      req.resume();
      res.writeHead(401, { "www-authenticate": 'Basic realm="forge"', "content-type": "text/plain" });
      res.end("authentication required\n");
      return;
    }
    serveCgi(root, "oauth2", req, res, log);
  });
  url = `http://127.0.0.1:${await listenOnFreePort(server)}`;
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return {
    url,
    statuses,
    gitRequests,
    projectIds,
    failStatuses: (n) => {
      failing = n;
    },
    refusedStatuses: () => refused,
    comments,
    commentWrites,
    failComments: (n) => {
      failingComments = n;
    },
  };
}

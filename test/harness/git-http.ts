// A private git host for the tests: git's smart-HTTP protocol served by the real
// `git http-backend` (git's own CGI) behind a Node HTTP server on a free loopback
// port that demands HTTP Basic auth, the way a private HTTPS host answers git: a
// request without the right credentials gets 401 and a WWW-Authenticate
// challenge, which is what makes a git client ask its askpass helper. Every
// request is recorded (method, path, headers, whether it was authorised, the
// status) so a test can see what git sent, and that the password travelled only
// in the Authorization header, never in a URL.
import { spawn } from "node:child_process";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { onCleanup } from "./cleanup";
import { listenOnFreePort } from "./ports";

export interface GitHttpRequest {
  method: string;
  /** The request target as sent (path and query). */
  path: string;
  headers: IncomingMessage["headers"];
  /** Whether the request carried the right credentials. */
  authorized: boolean;
  status: number;
}

export interface GitHttpServer {
  /** http://127.0.0.1:<port>/<name> — a URL without credentials for the repository `<root>/<name>`. */
  url(name: string): string;
  port: number;
  requests: GitHttpRequest[];
  stop(): Promise<void>;
}

/** Runs one request through `git http-backend` (RFC 3875 CGI) and relays its answer. */
export function serveCgi(
  root: string,
  user: string,
  req: IncomingMessage,
  res: ServerResponse,
  log: GitHttpRequest,
) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_CONFIG_NOSYSTEM: "1",
    REQUEST_METHOD: req.method ?? "GET",
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    CONTENT_TYPE: req.headers["content-type"] ?? "",
    REMOTE_USER: user,
    REMOTE_ADDR: req.socket.remoteAddress ?? "127.0.0.1",
    // Clients gzip large upload-pack bodies and ask for protocol v2 through a header.
    HTTP_CONTENT_ENCODING: req.headers["content-encoding"] ?? "",
    GIT_PROTOCOL: String(req.headers["git-protocol"] ?? ""),
  };
  if (req.headers["content-length"]) env.CONTENT_LENGTH = req.headers["content-length"];
  const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
      const at = line.indexOf(":");
      const name = line.slice(0, at).trim();
      const value = line.slice(at + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else res.setHeader(name, value);
    }
    log.status = status;
    res.statusCode = status;
    res.write(head.subarray(end + 4));
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  child.on("close", (code) => {
    if (headersDone) {
      res.end();
      return;
    }
    log.status = 500;
    res.statusCode = 500;
    res.end(`git http-backend exited ${code}: ${stderr}`);
  });
}

/**
 * Serves the repositories under `root` (bare, or work trees) to `user`:`password`
 * only; `password` may be a check (a token the test minted, say).
 */
export async function startGitHttp(
  root: string,
  user: string,
  password: string | ((given: string) => boolean),
): Promise<GitHttpServer> {
  const requests: GitHttpRequest[] = [];
  const ok = typeof password === "string" ? (p: string) => p === password : password;
  const authorizedBy = (header: string | undefined) => {
    const m = /^Basic (.+)$/.exec(header ?? "");
    if (!m) return false;
    const text = Buffer.from(m[1]!, "base64").toString("utf8");
    const at = text.indexOf(":");
    return at > 0 && text.slice(0, at) === user && ok(text.slice(at + 1));
  };
  const server = createServer((req, res) => {
    const authorized = authorizedBy(req.headers.authorization);
    const log: GitHttpRequest = {
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      authorized,
      status: 401,
    };
    requests.push(log);
    if (!authorized) {
      req.resume();
      res.writeHead(401, {
        "www-authenticate": 'Basic realm="relayctl-test-git"',
        "content-type": "text/plain",
      });
      res.end("authentication required\n");
      return;
    }
    serveCgi(root, user, req, res, log);
  });
  const port = await listenOnFreePort(server);
  const stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(stop);
  return { url: (name) => `http://127.0.0.1:${port}/${name}`, port, requests, stop };
}

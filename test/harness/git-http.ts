// A private git host for the tests: git's smart-HTTP protocol served by the real
// `git http-backend` as a CGI behind a Node HTTP server on a free loopback port,
// with HTTP Basic auth. A request without the right credentials gets 401 and a
// WWW-Authenticate challenge, which is what makes a git client ask its askpass
// helper. Every request line and its headers are recorded so a test can show
// that the password travelled only in the Authorization header, never in a URL.
import { spawn } from "node:child_process";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { basename, dirname } from "node:path";
import { onCleanup } from "./cleanup";

export interface GitHttpRequest {
  method: string;
  /** The request target as sent (path and query). */
  url: string;
  headers: IncomingMessage["headers"];
  /** Whether the request carried the right credentials. */
  authorized: boolean;
  status: number;
}

export interface GitHttpServer {
  /** http://127.0.0.1:<port>/<repo name> — a URL without credentials. */
  url: string;
  port: number;
  requests: GitHttpRequest[];
  stop(): Promise<void>;
}

export interface GitHttpOptions {
  /** The repository to serve (a work tree or a bare repository). */
  repoPath: string;
  username: string;
  password: string;
}

function authorized(req: IncomingMessage, expected: string): boolean {
  const header = req.headers.authorization ?? "";
  if (!header.startsWith("Basic ")) return false;
  return Buffer.from(header.slice(6), "base64").toString("utf8") === expected;
}

/** Runs one request through `git http-backend` (RFC 3875 CGI) and relays its answer. */
function runBackend(
  req: IncomingMessage,
  res: ServerResponse,
  root: string,
  user: string,
  log: GitHttpRequest,
) {
  const url = new URL(req.url ?? "/", "http://x");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
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
      const i = line.indexOf(":");
      const name = line.slice(0, i).trim();
      const value = line.slice(i + 1).trim();
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
    if (!headersDone) {
      log.status = 500;
      res.statusCode = 500;
      res.end(`git http-backend exited ${code}: ${stderr}`);
      return;
    }
    res.end();
  });
}

/** Serves repoPath at http://127.0.0.1:<free port>/<basename of repoPath>, Basic auth required. */
export async function startGitHttp(opts: GitHttpOptions): Promise<GitHttpServer> {
  const root = dirname(opts.repoPath);
  const expected = `${opts.username}:${opts.password}`;
  const requests: GitHttpRequest[] = [];
  const server = createServer((req, res) => {
    const ok = authorized(req, expected);
    const log: GitHttpRequest = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      authorized: ok,
      status: 401,
    };
    requests.push(log);
    if (!ok) {
      req.resume();
      res.writeHead(401, {
        "www-authenticate": 'Basic realm="relayctl-test-git"',
        "content-type": "text/plain",
      });
      res.end("authentication required\n");
      return;
    }
    runBackend(req, res, root, opts.username, log);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("git http: no port from listen(0)");
  const stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(stop);
  return {
    url: `http://127.0.0.1:${address.port}/${basename(opts.repoPath)}`,
    port: address.port,
    requests,
    stop,
  };
}

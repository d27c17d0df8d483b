// A private git repository over HTTP for the tests: `git http-backend` (git's
// own smart-HTTP CGI) behind a tiny Node server on 127.0.0.1:<free port> that
// demands HTTP basic auth, the way a private HTTPS host answers git (401 with
// WWW-Authenticate, then the credential). Requests are recorded (method, path,
// whether they were authorised) so a test can see what git sent.
import { spawn } from "node:child_process";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import { onCleanup } from "./cleanup";

const BACKEND = "/usr/lib/git-core/git-http-backend";

export interface GitHttpServer {
  /** http://127.0.0.1:<port>/<name> */
  url(name: string): string;
  requests: { method: string; path: string; authorized: boolean }[];
  stop(): Promise<void>;
}

function serveCgi(root: string, user: string, req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const env: Record<string, string> = {
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    PATH_INFO: url.pathname,
    QUERY_STRING: url.search.slice(1),
    REQUEST_METHOD: req.method ?? "GET",
    CONTENT_TYPE: String(req.headers["content-type"] ?? ""),
    REMOTE_USER: user,
    REMOTE_ADDR: "127.0.0.1",
    PATH: process.env.PATH ?? "/usr/bin:/bin",
  };
  if (req.headers["content-length"]) env.CONTENT_LENGTH = String(req.headers["content-length"]);
  if (req.headers["content-encoding"]) env.HTTP_CONTENT_ENCODING = String(req.headers["content-encoding"]);
  const child = spawn(BACKEND, [], { env, stdio: ["pipe", "pipe", "inherit"] });
  req.pipe(child.stdin);
  let head = Buffer.alloc(0);
  let body = false;
  child.stdout.on("data", (chunk: Buffer) => {
    if (body) return void res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) return;
    const headers: Record<string, string> = {};
    let status = 200;
    for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
      const at = line.indexOf(":");
      const name = line.slice(0, at).trim();
      const value = line.slice(at + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    body = true;
    res.write(head.subarray(end + 4));
  });
  child.stdout.on("end", () => res.end());
}

/** Serves the bare repositories under `root` to `user`:`password` only. */
export async function startGitHttp(root: string, user: string, password: string): Promise<GitHttpServer> {
  const requests: GitHttpServer["requests"] = [];
  const expected = `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
  const server = createServer((req, res) => {
    const authorized = req.headers.authorization === expected;
    requests.push({ method: req.method ?? "", path: req.url ?? "", authorized });
    if (!authorized) {
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="private"' });
      res.end();
      return;
    }
    serveCgi(root, user, req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("git http: no port");
  const stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(stop);
  return { url: (name) => `http://127.0.0.1:${address.port}/${name}`, requests, stop };
}

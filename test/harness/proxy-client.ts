// Traffic through a reverse proxy the way a browser sends it: a request to the
// proxy's port with `Host: <fqdn>`, and backends that say who they are, so a
// test sees which upstream a domain reaches.
import { type Server, createServer, request } from "node:http";
import { onCleanup } from "./cleanup";
import { pollUntil } from "./wait";

const REQUEST_TIMEOUT_MS = 5_000;

export interface ProxyResponse {
  status: number;
  body: string;
}

/**
 * GET http://127.0.0.1:<port><path> with the given Host header, on a fresh
 * connection each time (no keep-alive): after a reload, a kept-alive connection
 * would still reach the proxy's old configuration.
 */
export function proxyGet(port: number, host: string, path = "/"): Promise<ProxyResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, method: "GET", headers: { host, connection: "close" }, agent: false },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer from 127.0.0.1:${port} for ${host}`)),
    );
    req.on("error", reject);
    req.end();
  });
}

export interface Backend {
  port: number;
  stop(): Promise<void>;
}

function close(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/** An HTTP server on 127.0.0.1:<free port> answering every request with 200 `backend <name>`. */
export async function startBackend(name: string): Promise<Backend> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`backend ${name}`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("backend: no port from listen(0)");
  const stop = () => close(server);
  onCleanup(stop);
  return { port: address.port, stop };
}

/** Polls proxyGet until `host` answers `backend <name>`; the error says what it answered last. */
export async function waitForBackend(
  port: number,
  host: string,
  name: string,
  timeoutMs: number,
): Promise<void> {
  let last = "no answer yet";
  await pollUntil(
    async () => {
      const res = await proxyGet(port, host);
      last = `${res.status} ${JSON.stringify(res.body.slice(0, 200))}`;
      return res.body === `backend ${name}` ? true : undefined;
    },
    { what: `${host} via 127.0.0.1:${port} to answer "backend ${name}"`, timeoutMs },
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last answer ${last}`);
  });
}

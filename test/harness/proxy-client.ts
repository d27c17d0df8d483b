// Traffic through a reverse proxy the way a browser sends it: a request to the
// proxy's port with `Host: <fqdn>`, and backends that say who they are, so a
// test sees which upstream a domain reaches.
import { type Server, createServer } from "node:http";
import { type ProxyResponse, proxyGet } from "@relayctl/devkit";
import { onCleanup } from "./cleanup";
import { pollUntil } from "./wait";
import { listenOnFreePort } from "./ports";

// proxyGet (a fresh connection per request) is @relayctl/devkit's, shared with bench/deploy.mjs.
export { type ProxyResponse, proxyGet };

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
  const port = await listenOnFreePort(server);
  const stop = () => close(server);
  onCleanup(stop);
  return { port, stop };
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

// A relayctl installation whose agent syncs routes into a real reverse proxy:
// the cluster (NATS, MariaDB, api, gateway, agent) plus a throwaway Caddy or
// nginx the agent writes to, an rck_ API key to manage applications, and helpers
// for the external-deploy calls.
import { type CaddyServer, startCaddy } from "./caddy";
import { type Cluster, startCluster } from "./cluster";
import { type ApiResponse, type RequestOptions, request } from "./http";
import { type NginxServer, startNginx } from "./nginx";

export interface RouteStackOptions {
  proxy?: "caddy" | "nginx";
  agentEnv?: Record<string, string>;
  /** Extra env of the control-plane processes (the GitHub App settings, say). */
  serverEnv?: Record<string, string>;
}

export interface ApplicationBody {
  name: string;
  linked_container_name: string;
  container_port: number;
  fqdns: string[];
  server_id?: string;
}

export interface RouteStack {
  c: Cluster;
  /** rck_ key of the cluster's tenant. */
  apiKey: string;
  /** Where the proxy serves the routed domains (send Host: <fqdn>). */
  proxyPort: number;
  caddy?: CaddyServer;
  nginx?: NginxServer;
  /** Agent env that points an agent at this stack's proxy (for more agents). */
  proxyEnv: Record<string, string>;
  /** Management API call with the stack's X-API-Key. */
  manage(path: string, opts?: RequestOptions): Promise<ApiResponse>;
  createApplication(body: ApplicationBody): Promise<{ id: string }>;
  openSession(body: Record<string, unknown>, key?: string | null): Promise<ApiResponse>;
  sync(token: string, deployments: Record<string, unknown>[]): Promise<ApiResponse>;
  deleteSession(id: string, bearer: string): Promise<ApiResponse>;
  stop(): Promise<void>;
}

function uniq(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

async function proxyFor(kind: "caddy" | "nginx") {
  if (kind === "caddy") {
    const caddy = await startCaddy();
    const env = {
      RELAYCTL_AGENT_PROXY: "caddy",
      RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
      RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
      RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
    };
    return { caddy, env, port: caddy.httpPort, stop: () => caddy.stop() };
  }
  const nginx = await startNginx();
  const env = {
    RELAYCTL_AGENT_PROXY: "nginx",
    RELAYCTL_AGENT_NGINX_CONF_DIR: nginx.confDir,
    RELAYCTL_AGENT_NGINX_LISTEN: String(nginx.port),
    RELAYCTL_AGENT_NGINX_CONFIG: nginx.configFile,
    RELAYCTL_AGENT_NGINX_PREFIX: nginx.prefix,
  };
  return { nginx, env, port: nginx.port, stop: () => nginx.stop() };
}

export async function startRouteStack(opts: RouteStackOptions = {}): Promise<RouteStack> {
  const proxy = await proxyFor(opts.proxy ?? "caddy");
  const c = await startCluster({ agentEnv: { ...proxy.env, ...opts.agentEnv }, serverEnv: opts.serverEnv });
  const out = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", uniq("mgmt")]);
  const apiKey = String(out.key);
  const manage = (path: string, o: RequestOptions = {}) =>
    request(c, `/api${path}`, { ...o, key: null, headers: { "x-api-key": apiKey, ...o.headers } });
  return {
    c,
    apiKey,
    proxyPort: proxy.port,
    caddy: "caddy" in proxy ? proxy.caddy : undefined,
    nginx: "nginx" in proxy ? proxy.nginx : undefined,
    proxyEnv: proxy.env,
    manage,
    async createApplication(body) {
      const res = await manage("/applications", { body: { server_id: c.serverId, ...body } });
      if (res.status !== 201) throw new Error(`POST /api/applications: ${res.status} ${res.text}`);
      return { id: String(res.json.id) };
    },
    openSession: (body, key) => request(c, "/external-deploy/session", { body, key }),
    sync: (token, deployments) => request(c, "/external-deploy/sync", { body: { deployments }, key: token }),
    deleteSession: (id, bearer) =>
      request(c, `/external-deploy/session/${id}`, { method: "DELETE", key: bearer }),
    async stop() {
      await c.stop();
      await proxy.stop();
    },
  };
}

// A relayctl installation that deploys for real: the route stack (NATS, MariaDB,
// api, gateway, a Caddy the agent writes routes to) with an agent that builds and
// runs containers with podman (runc recipe, containers.ts), drains old versions
// for one second only, and reaches a test registry when one is given. Helpers call
// the deployment endpoints of the contract (issue 11) the way a CI pipeline and the
// dashboard do, and remove every container and image the agent made for the
// stack's applications at cleanup (podman is shared).
import { onCleanup } from "./cleanup";
import { podman, podmanAgentEnv, removeAppContainers, removeAppImages } from "./containers";
import { APP_PORT, type AppRepo } from "./git-repo";
import { type ApiResponse, api, waitForOperationEnd } from "./http";
import { type RouteStack, startRouteStack } from "./route-stack";

export interface DeployStackOptions {
  /** registries.conf for the agent's podman (CONTAINERS_REGISTRIES_CONF). */
  registriesConf?: string;
  agentEnv?: Record<string, string>;
  serverEnv?: Record<string, string>;
}

/** Application fields of the contract; createApp fills what a test leaves out. */
export interface AppFields {
  name?: string;
  server_id?: string;
  linked_container_name?: string;
  container_port?: number;
  fqdns?: string[];
  git_repository?: string | null;
  deploy_branch?: string;
  git_credential?: { username: string; password: string } | null;
  build?: Record<string, unknown>;
  health_check_path?: string;
  health_check_timeout_seconds?: number;
  auto_deploy?: boolean;
}

export interface App {
  id: string;
  name: string;
  /** The application's first domain (send `Host: <fqdn>` to the proxy port). */
  fqdn: string;
  created: ApiResponse;
}

export interface DeployBody {
  commit_ref?: string;
  env_overrides?: Record<string, string>;
  timeout_seconds?: number;
  run_id?: string;
  run_context?: Record<string, string>;
}

export interface DeployStack extends RouteStack {
  tenantId: string;
  /** /tenants/<tenant>/applications/<app><suffix>, for manage(). */
  appPath(appId: string, suffix?: string, tenantId?: string): string;
  createApp(fields: AppFields, repo?: AppRepo): Promise<App>;
  /** POST /api/automation/v1/deploy (Bearer key; the cluster's when key is undefined). */
  deploy(appId: string, body?: DeployBody, key?: string | null): Promise<ApiResponse>;
  /** POST /api/tenants/{tid}/applications/{aid}/deploy (X-API-Key). */
  dashboardDeploy(appId: string, body?: DeployBody): Promise<ApiResponse>;
  /** Deploys through the Automation API and waits for the operation's final state. */
  deployAndWait(appId: string, body?: DeployBody, timeoutMs?: number): Promise<Deployed>;
  /** Polls GET /operations/{id} until it is no longer running. */
  waitOperation(operationId: string, timeoutMs?: number): Promise<ApiResponse>;
  deployment(appId: string, deploymentId: string): Promise<ApiResponse>;
  history(appId: string, query?: string): Promise<ApiResponse>;
  setEnv(appId: string, variables: Record<string, string>): Promise<ApiResponse>;
  /** Names of the containers (running or not) labelled with the application. */
  containersOf(appId: string): Promise<string[]>;
}

export interface Deployed {
  operationId: string;
  deploymentId: string;
  started: ApiResponse;
  /** GET /operations/{id} in its final state. */
  op: ApiResponse;
}

/** Enough for a build, a start and a health check on a busy 2-core machine. */
export const DEPLOY_WAIT_MS = 120_000;

function uniq(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

async function removeAppArtifacts(appId: string): Promise<void> {
  await removeAppContainers(appId);
  await removeAppImages(appId);
}

export async function startDeployStack(opts: DeployStackOptions = {}): Promise<DeployStack> {
  const s = await startRouteStack({
    proxy: "caddy",
    agentEnv: {
      ...podmanAgentEnv,
      RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "1",
      ...(opts.registriesConf ? { CONTAINERS_REGISTRIES_CONF: opts.registriesConf } : {}),
      ...opts.agentEnv,
    },
    serverEnv: opts.serverEnv,
  });
  const tenantId = s.c.tenantId;
  const appPath = (appId: string, suffix = "", tid = tenantId) =>
    `/tenants/${tid}/applications/${appId}${suffix}`;
  const deploy = (appId: string, body: DeployBody = {}, key?: string | null) =>
    api(s.c, "/deploy", { body: { application_id: appId, ...body }, key });
  const waitOperation = (id: string, timeoutMs = DEPLOY_WAIT_MS) => waitForOperationEnd(s.c, id, timeoutMs);
  return {
    ...s,
    tenantId,
    appPath,
    async createApp(fields, repo) {
      const name = fields.name ?? uniq("app");
      const body = {
        name,
        server_id: s.c.serverId,
        linked_container_name: name,
        container_port: APP_PORT,
        fqdns: [`${name}.deploy.test`],
        git_repository: repo?.path ?? null,
        build: { type: "dockerfile" },
        ...fields,
      };
      const created = await s.manage("/applications", { body });
      if (created.status !== 201)
        throw new Error(`POST /api/applications: ${created.status} ${created.text}`);
      const id = String(created.json.id);
      onCleanup(() => removeAppArtifacts(id));
      return { id, name, fqdn: body.fqdns[0]!, created };
    },
    deploy,
    dashboardDeploy: (appId, body = {}) => s.manage(appPath(appId, "/deploy"), { body }),
    async deployAndWait(appId, body = {}, timeoutMs = DEPLOY_WAIT_MS) {
      const started = await deploy(appId, body);
      if (started.status !== 202) throw new Error(`POST /deploy: ${started.status} ${started.text}`);
      const operationId = String(started.json.operation_id);
      const op = await waitOperation(operationId, timeoutMs);
      return { operationId, deploymentId: String(started.json.deployment_id), started, op };
    },
    waitOperation,
    deployment: (appId, id) => s.manage(appPath(appId, `/deployments/${id}`)),
    history: (appId, query = "") => s.manage(appPath(appId, `/deployments${query}`)),
    setEnv: (appId, variables) => s.manage(appPath(appId, "/env"), { body: { variables } }),
    async containersOf(appId) {
      const out = await podman([
        "ps",
        "-a",
        "--format",
        "{{.Names}}",
        "--filter",
        `label=relayctl.application=${appId}`,
      ]);
      return out.stdout.split("\n").filter(Boolean).sort();
    },
  };
}

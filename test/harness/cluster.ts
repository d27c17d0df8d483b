// A whole relayctl installation for one test: NATS, MariaDB, an api process, a separate gateway
// process (or several of each), a tenant, an automation key, and one enrolled, connected agent.
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { setupAdmin } from "./admin-steps";
import { Agent, enrollInProcess } from "./agent";
import { makeTempDir } from "./cleanup";
import { type ControlPlane, startControlPlane } from "./control-plane";
import type { ApiTarget } from "./http";
import { type Database, type MariaDbServer, sharedMariaDb } from "./mariadb";
import { type Nats, sharedNats, startNats } from "./nats";

export interface ClusterOptions {
  /** Start a NATS server owned by this cluster (for tests that kill it). */
  ownNats?: boolean;
  /** A NATS to use instead (a startNatsCluster(), which the test stops itself). */
  nats?: Nats;
  /** How many gateway processes; agents are given all of their URLs. @default 1 */
  gateways?: number;
  /** How many api processes. @default 1 */
  apis?: number;
  /** A database server to use instead of the file's shared one (for tests that stop it). */
  mariadb?: MariaDbServer;
  serverEnv?: Record<string, string>;
  agentEnv?: Record<string, string>;
}

export interface ServerHandle {
  serverId: string;
  serverName: string;
  stateDir: string;
  /** Started agent, or undefined when enrolled only. */
  agent?: Agent;
}

export interface Cluster extends ApiTarget {
  baseUrl: string;
  key: string;
  keyId: string;
  tenantId: string;
  serverId: string;
  serverName: string;
  nats: Nats;
  db: Database;
  api: ControlPlane;
  gateway: ControlPlane;
  /** Every api process (api is the first). */
  apis: ControlPlane[];
  /** Every gateway process (gateway is the first). */
  gateways: ControlPlane[];
  agent: Agent;
  dir: string;
  admin(args: string[]): Promise<Record<string, unknown>>;
  /** Creates a join token and enrolls another server; starts its agent when start is true. */
  addServer(opts: { start: boolean; name?: string }): Promise<ServerHandle>;
  /** Creates another automation key of the tenant. */
  createKey(extra?: string[]): Promise<{ key: string; keyId: string }>;
  /**
   * Another tenant on the same processes and database, with its own key and one enrolled,
   * connected agent: for tests that each need a tenant of their own (a chain, a key's limits)
   * but not fresh processes. The answer is this cluster seen as that tenant.
   */
  addTenant(): Promise<Cluster>;
  /** Log text of every control-plane and agent process of this cluster. */
  logText(): string;
  stop(): Promise<void>;
}

/**
 * An enroll that failed, with what became of the api process it asked: a refused connection
 * right after "api listening" means the process ended, and its exit (code, signal) and last
 * lines say how (CI once saw only "cannot reach", with no trace of why).
 */
async function withApiState(err: unknown, api: ControlPlane): Promise<Error> {
  const error = err instanceof Error ? err : new Error(String(err));
  // A process that just died may not have been reaped yet: its exit is given a moment to arrive.
  await Promise.race([api.proc.exited, delay(1000)]);
  const exit = api.proc.exit;
  const state = exit
    ? `the api process had ended (exit code ${exit.code}, signal ${exit.signal})`
    : `the api process (pid ${api.proc.pid}) was still running`;
  error.message = `${error.message}; ${state}; log ${api.proc.logFile}, last lines:\n${api.proc.tail(15)}`;
  return error;
}

function uniq(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
}

export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const dir = makeTempDir("cluster");
  const [nats, mariadb] = await Promise.all([
    opts.nats ?? (opts.ownNats ? startNats() : sharedNats()),
    opts.mariadb ?? sharedMariaDb(),
  ]);
  const db = await mariadb.createDatabase();
  const common = { databaseUrl: db.url, natsUrl: nats.url, dir, env: opts.serverEnv };
  // The gateway first: it binds port 0 and reports the port, which the api hands to agents.
  // It also migrates the database before the others start (they then find nothing to do).
  const gateway = await startControlPlane({ ...common, role: "gateway" });
  const gateways = [gateway];
  for (let i = 1; i < (opts.gateways ?? 1); i++)
    gateways.push(await startControlPlane({ ...common, role: "gateway" }));
  const publicGatewayUrl = gateways.map((g) => g.gatewayUrl).join(",");
  const apis = await Promise.all(
    Array.from({ length: opts.apis ?? 1 }, () =>
      startControlPlane({ ...common, role: "api", publicGatewayUrl }),
    ),
  );
  const api = apis[0]!;
  const admin = (args: string[]) => api.admin(args);
  // The set-up's own steps in this process; tests' admin() calls still run the CLI.
  const setup = setupAdmin(db.url, opts.serverEnv);
  const agents: Agent[] = [];
  const stop = async () => {
    for (const a of agents) await a.stop();
    for (const g of gateways) await g.stop();
    for (const a of apis) await a.stop();
    if (opts.ownNats) await nats.stop();
  };
  const shared = { nats, db, api, gateway, apis, gateways, dir, admin, stop };

  /** A new tenant with its key and first server; the cluster as that tenant. */
  const tenantCluster = async (): Promise<Cluster> => {
    const tenant = await setup(["create-tenant", "--name", uniq("tenant")]);
    const tenantId = String(tenant.tenant_id);
    const createKey = async (extra: string[] = []) => {
      const out = await setup([
        "create-automation-key",
        "--tenant",
        tenantId,
        "--name",
        uniq("key"),
        ...extra,
      ]);
      return { key: String(out.key), keyId: String(out.key_id) };
    };
    const addServer = async (o: { start: boolean; name?: string }): Promise<ServerHandle> => {
      const name = o.name ?? uniq("server");
      const token = await setup(["create-join-token", "--tenant", tenantId, "--server-name", name]);
      const stateDir = join(dir, `agent-${name}`);
      const enrolled = await enrollInProcess(api.apiUrl, String(token.join_token), stateDir).catch(
        async (err: unknown) => Promise.reject(await withApiState(err, api)),
      );
      const handle: ServerHandle = {
        serverId: enrolled.server_id,
        serverName: enrolled.server_name,
        stateDir,
      };
      if (o.start) {
        handle.agent = new Agent(stateDir, dir, opts.agentEnv);
        agents.push(handle.agent);
        await handle.agent.start();
      }
      return handle;
    };
    // The tenant's own key gets the contract's maximum rate limit: tests drive many
    // calls through it; rate-limit tests create keys with small limits of their own.
    const { key, keyId } = await createKey(["--rate-limit", "1000"]);
    const first = await addServer({ start: true });
    return {
      ...shared,
      baseUrl: api.apiUrl,
      key,
      keyId,
      tenantId,
      serverId: first.serverId,
      serverName: first.serverName,
      agent: first.agent!,
      addServer,
      createKey,
      addTenant: tenantCluster,
      logText: () => [...apis, ...gateways, ...agents].map((p) => p.logText()).join("\n"),
    };
  };
  return tenantCluster();
}

// The relayctl side of the exec bench, started the way docs/process-interfaces.md fixes it:
// migrations and admin commands (tenant, automation keys, join token), then a gateway process and
// a separate api process on NATS + MariaDB, then one agent enrolled through the api and connected.
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { jsonWithField, run } from "./processes.mjs";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SERVER_MAIN = join(REPO, "control-plane/dist/cli/main.js");
const AGENT_MAIN = join(REPO, "agent/dist/cli/main.js");

function requireBuilt() {
  for (const file of [SERVER_MAIN, AGENT_MAIN]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: build first (npx tsc -b; make bench does)`);
  }
}

// BENCH_CPU_PROF=<dir>: the api and the gateway write V8 CPU profiles there when they stop.
const cpuProf = (name) =>
  process.env.BENCH_CPU_PROF
    ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`, `--cpu-prof-name=${name}.cpuprofile`]
    : [];

// The gateway's young generation, bounded as its unit and image bound it (docs/operating.md:
// Node 24 grows it to 128 MiB under a reconnect storm). BENCH_GATEWAY_NODE_OPTIONS replaces it
// (empty: V8's default) to compare.
const GATEWAY_NODE_OPTIONS = process.env.BENCH_GATEWAY_NODE_OPTIONS ?? "--max-semi-space-size=8";
// BENCH_GATEWAY_NODE_ARGS: more of node's flags for the gateway (V8's that NODE_OPTIONS refuses).
const GATEWAY_NODE_ARGS = (process.env.BENCH_GATEWAY_NODE_ARGS ?? "").split(" ").filter(Boolean);
// BENCH_GATEWAY_ENV: more environment for the gateway alone, `NAME=value` separated by spaces.
const GATEWAY_ENV = Object.fromEntries(
  (process.env.BENCH_GATEWAY_ENV ?? "")
    .split(" ")
    .filter(Boolean)
    .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
);

/**
 * A gateway process (`RELAYCTL_ROLE=gateway`) with the stack's environment `env`, listening on
 * `listen` (host:port; port 0 picks one). Resolves once it listens, with its grpc:// URL.
 */
export async function startGateway(
  group,
  env,
  { listen = "127.0.0.1:0", name = "gateway", extraEnv = {} } = {},
) {
  const args = [...GATEWAY_NODE_ARGS, ...cpuProf(name), SERVER_MAIN, "serve"];
  const proc = group.start(name, process.execPath, args, {
    env: {
      ...env,
      RELAYCTL_ROLE: "gateway",
      NODE_OPTIONS: [env.NODE_OPTIONS, GATEWAY_NODE_OPTIONS].filter(Boolean).join(" "),
      RELAYCTL_GATEWAY_LISTEN: listen,
      RELAYCTL_GATEWAY_METRICS_LISTEN: "127.0.0.1:0",
      RELAYCTL_API_LISTEN: "127.0.0.1:0",
      ...GATEWAY_ENV,
      ...extraEnv,
    },
  });
  const url = (await proc.waitForMsg("gateway listening", { timeoutMs: 60_000 })).url;
  return { proc, url };
}

/**
 * Starts api + gateway + agent. `keyCount` automation keys (all operations, `keyRateLimit` requests
 * per minute) are created so the bench can spread its requests over them and stay under the per-key
 * rate limit; `apiKeyCount` rck_ API keys for the management API (100 requests per minute each).
 * `agentEnv` is added to the agent's environment (its reverse-proxy settings, for example).
 */
export async function startRelayctl(
  group,
  dir,
  {
    natsUrl,
    databaseUrl,
    keyCount = 1,
    keyRateLimit,
    apiKeyCount = 0,
    agentEnv: extraAgentEnv = {},
    logLevel = "info",
    gatewayListen = "127.0.0.1:0",
  },
) {
  requireBuilt();
  const node = process.execPath;
  const base = {
    ...process.env,
    RELAYCTL_DATABASE_URL: databaseUrl,
    RELAYCTL_BUS: "nats",
    RELAYCTL_NATS_URL: natsUrl,
    RELAYCTL_LOG_LEVEL: logLevel,
    // The deploy bench's application is a git repository on this machine (a local path).
    RELAYCTL_ALLOW_LOCAL_GIT_SOURCES: "true",
    // The audit chain's HMAC key (a fixed bench-only value): serve and admin need one.
    RELAYCTL_AUDIT_HMAC_KEY:
      process.env.RELAYCTL_AUDIT_HMAC_KEY ?? "cmVsYXljdGwtYmVuY2gtYXVkaXQta2V5LTMyYnl0ZXM=",
  };
  const admin = async (args, field) =>
    jsonWithField((await run(node, [SERVER_MAIN, ...args], { env: base })).stdout, field);

  await run(node, [SERVER_MAIN, "migrate"], { env: base });
  const tenant = await admin(["admin", "create-tenant", "--name", "bench"], "tenant_id");
  const keys = [];
  for (let i = 0; i < keyCount; i++) {
    const args = ["admin", "create-automation-key", "--tenant", tenant.tenant_id, "--name", `bench-${i}`];
    if (keyRateLimit) args.push("--rate-limit", String(keyRateLimit));
    keys.push((await admin(args, "key")).key);
  }
  const apiKeys = [];
  for (let i = 0; i < apiKeyCount; i++) {
    const args = ["admin", "create-api-key", "--tenant", tenant.tenant_id, "--name", `bench-mgmt-${i}`];
    apiKeys.push((await admin(args, "key")).key);
  }
  const joinToken = await admin(
    ["admin", "create-join-token", "--tenant", tenant.tenant_id, "--server-name", "bench-agent"],
    "join_token",
  );

  const { proc: gateway, url: gatewayUrl } = await startGateway(group, base, { listen: gatewayListen });
  const api = group.start("api", node, [...cpuProf("api"), SERVER_MAIN, "serve"], {
    env: {
      ...base,
      RELAYCTL_ROLE: "api",
      RELAYCTL_API_LISTEN: "127.0.0.1:0",
      RELAYCTL_GATEWAY_LISTEN: "127.0.0.1:0",
      RELAYCTL_PUBLIC_GATEWAY_URLS: gatewayUrl,
    },
  });
  const baseUrl = (await api.waitForMsg("api listening", { timeoutMs: 30_000 })).url;

  const stateDir = join(dir, "agent");
  const agentEnv = {
    ...process.env,
    RELAYCTL_AGENT_STATE_DIR: stateDir,
    RELAYCTL_AGENT_LOG_LEVEL: logLevel,
    ...extraAgentEnv,
  };
  const enrollArgs = [
    AGENT_MAIN,
    "enroll",
    "--url",
    baseUrl,
    "--token",
    joinToken.join_token,
    "--state-dir",
    stateDir,
  ];
  const enrolled = jsonWithField((await run(node, enrollArgs, { env: agentEnv })).stdout, "server_id");

  const agent = group.start(
    "agent",
    node,
    [...cpuProf("agent"), AGENT_MAIN, "run", "--state-dir", stateDir, "--gateway", gatewayUrl],
    {
      env: agentEnv,
    },
  );
  await agent.waitForMsg("connected", { timeoutMs: 30_000 });

  return {
    env: base,
    baseUrl,
    gatewayUrl,
    keys,
    apiKeys,
    tenantId: tenant.tenant_id,
    serverId: enrolled.server_id,
    procs: { gateway, api, agent },
  };
}

#!/usr/bin/env node
// make dev: runs the control plane in this process (api + gateway, SQLite, in-process bus) and one
// local agent enrolled as server "local" as a child, a supervised Caddy as the agent's reverse
// proxy (scripts/dev/proxy.mjs), so every application gets http://<app>.localhost:<proxy port>,
// a container engine the agent can use (scripts/dev/engine.mjs: podman's containers.conf, the
// sample's local base image), and a banner saying how to sign in, deploy the sample
// (scripts/dev-hello.mjs) and run the CLI. State lives in <repo>/.relayctl: dev.db, agent/,
// caddy/, containers.conf and state.json (base_url, automation_key, api_key, server_id,
// server_name; mode 0600), reused by the next run. docs/dev.md is the person's guide.
//
// dev.json (the same fields) is the "ready" signal scripts wait for: it is removed at start and at
// stop, and written (atomically, 0600) only once the agent is connected and an exec through the
// API has come back completed, so a script that sees it gets a working exec on its first try. It
// adds this run's proxy_url, apps_url and dashboard_url (null without Caddy).
//
//   node scripts/dev.mjs          run until Ctrl-C
//   node scripts/dev.mjs --once   smoke check: start, exec `echo relayctl-dev-ok`, deploy examples/hello,
//                                 GET its dev URL through Caddy, stop (also RELAYCTL_DEV_SMOKE=1); it
//                                 fails when Caddy or a container engine is missing
//
// Variables (each with its default):
//   RELAYCTL_DEV_PORT              8080         the API and dashboard
//   RELAYCTL_DEV_GATEWAY_PORT      8443         the agents' gRPC gateway
//   RELAYCTL_DEV_PROXY_PORT        8000         Caddy's listener for the applications
//   RELAYCTL_DEV_PROXY_ADMIN_PORT  a free port  Caddy's admin API (the agent writes routes there)
//   RELAYCTL_DEV_OWNER_EMAIL       you@relayctl.localhost  the account the sign-in link creates
//   RELAYCTL_DEV_DIR               <repo>/.relayctl        the state
import { existsSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import net from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ProcessGroup, freePort, jsonAnswer, pollUntil, run } from "@relayctl/devkit";
import { printReady } from "./dev/banner.mjs";
import { chooseEngine, ensureBaseImage } from "./dev/engine.mjs";
import { HELLO_TEXT, appUrl, deployAndFollow, ensureHello, getThroughProxy } from "./dev/hello.mjs";
import { OWNER_LINK_TTL_MS, ownerInvite } from "./dev/owner.mjs";
import { makePrinter, prettyDestination } from "./dev/logs.mjs";
import { caddyBinary, startDevProxy } from "./dev/proxy.mjs";
import { stateFiles } from "./dev/state.mjs";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CONTROL_PLANE = join(REPO, "control-plane/dist");
const AGENT_MAIN = join(REPO, "agent/dist/cli/main.js");
const SERVER_NAME = "local";
const TENANT_NAME = "dev";
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 8_000;

const COLOR = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code, s) => (COLOR ? `\x1b[${code}m${s}\x1b[0m` : s);
const say = (msg) => console.log(`${paint("1", "[dev]")} ${msg}`);
const warn = (msg) => console.log(`${paint("33;1", "[dev]")} ${msg}`);

const ONCE = process.argv.includes("--once") || process.env.RELAYCTL_DEV_SMOKE === "1";
const STATE_DIR = resolve(process.env.RELAYCTL_DEV_DIR || join(REPO, ".relayctl"));
const files = stateFiles(STATE_DIR, say);
const { dbFile: DB_FILE, agentDir: AGENT_DIR, devJson: DEV_JSON, stateJson: STATE_JSON } = files;
const API_PORT = portFromEnv("RELAYCTL_DEV_PORT", 8080);
const GATEWAY_PORT = portFromEnv("RELAYCTL_DEV_GATEWAY_PORT", 8443);
const PROXY_PORT = portFromEnv("RELAYCTL_DEV_PROXY_PORT", 8000);
const PROXY_ADMIN_PORT = portFromEnv("RELAYCTL_DEV_PROXY_ADMIN_PORT", 0);

function die(msg, code = 1) {
  console.error(`${paint("31;1", "[dev]")} ${msg}`);
  process.exit(code);
}

function portFromEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    die(`${name} must be a port number (1-65535), got "${raw}"`, 2);
  return n;
}

// --- logs: pino-pretty through devkit's formatter (scripts/dev/logs.mjs) ---------------------------

const printer = makePrinter(paint, COLOR);

// --- the control plane, in this process ---------------------------------------------------------

const require = createRequire(import.meta.url);
const cp = {
  ...require(join(CONTROL_PLANE, "config.js")),
  ...require(join(CONTROL_PLANE, "serve.js")),
  ...require(join(CONTROL_PLANE, "cli/admin.js")),
  ...require(join(CONTROL_PLANE, "db/knex.js")),
  ...require(join(CONTROL_PLANE, "lib/logger.js")),
  ...require(join(CONTROL_PLANE, "audit/chain-key.js")),
};

/** Runs fn with a database handle of its own (the admin steps), migrated first. */
async function withDb(env, fn) {
  const url = cp.loadDatabaseUrl(env);
  // The admin steps write audit events: key the chain as serve will (SQLite's key file).
  cp.useAuditKeys(cp.auditKeysFromEnv(url, env));
  const db = cp.openDb(url);
  try {
    await cp.migrateWithRetry(db, { warn: () => {} });
    return await fn(db);
  } finally {
    await db.destroy();
  }
}

async function createTenantKeyAndJoinToken(env) {
  say(
    `first run: creating tenant "${TENANT_NAME}", an automation key and a join token for server "${SERVER_NAME}"`,
  );
  return withDb(env, async (db) => {
    const tenant = await cp.createTenant(db, TENANT_NAME);
    const key = await cp.createAutomationKey(db, { tenant: tenant.tenant_id, name: "dev" });
    const apiKey = await cp.createApiKey(db, { tenant: tenant.tenant_id, name: "dev" });
    const token = await cp.createJoinToken(db, {
      tenant: tenant.tenant_id,
      serverName: SERVER_NAME,
      ttlMinutes: 60,
    });
    return { key: key.key, apiKey: apiKey.key, joinToken: token.join_token };
  });
}

/** A regular API key (X-API-Key) of the dev tenant, for the management API (/api/...). */
function createApiKey(env) {
  return withDb(env, async (db) => (await cp.createApiKey(db, { tenant: TENANT_NAME, name: "dev" })).key);
}

async function startControlPlane(env) {
  const config = cp.loadConfig(env);
  const log = cp.createLogger(
    config.logLevel,
    { role: config.role },
    prettyDestination(printer("control-plane", "36")),
  );
  return cp.serve(config, log);
}

// --- the agent, the one child ---------------------------------------------------------------------

const group = new ProcessGroup();
let stopping = false;
let controlPlane;
let proxy;

function startAgent(args, env) {
  const print = printer("agent", "35");
  const agent = group.start({
    name: "agent",
    command: process.execPath,
    args: [AGENT_MAIN, ...args],
    env,
    cwd: REPO,
    // Its own process group: Ctrl-C reaches only this script, which stops the agent first.
    detached: true,
    keepLines: 200,
    onLine: (line) => print(line.text),
  });
  agent.exited.then((exit) => {
    if (!stopping)
      fail(`agent exited unexpectedly (${exit.signal ?? `exit code ${exit.code}`}); see its log lines above`);
  });
  return agent;
}

/** Stops the agent, then the control plane, then exits. */
async function shutdown(code, msg) {
  if (stopping) return;
  stopping = true;
  if (msg) (code === 0 ? say : (m) => console.error(`${paint("31;1", "[dev]")} ${m}`))(msg);
  // No longer ready: a script must not find the file of a stopped run.
  rmSync(DEV_JSON, { force: true });
  proxy?.stop();
  await group.stopAll("SIGTERM", STOP_GRACE_MS);
  await controlPlane?.stop();
  process.exit(code);
}

const fail = (msg) => shutdown(1, msg);

function onSignal(sig) {
  if (!stopping) return shutdown(0, `${sig}: stopping the agent and the control plane`);
  // A second Ctrl-C while stopping: do not make anyone wait (the supervisor kills the agent at exit).
  rmSync(DEV_JSON, { force: true });
  process.exit(130);
}

// --- setup -------------------------------------------------------------------------------------------

function portIsFree(port) {
  return new Promise((res) => {
    const srv = net.createServer();
    srv.once("error", () => res(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => res(true)));
  });
}

/** A clear message before anything starts, instead of a bind error from deep inside. */
async function checkPorts(withProxy) {
  const ports = [
    [API_PORT, "API", "RELAYCTL_DEV_PORT"],
    [GATEWAY_PORT, "gateway", "RELAYCTL_DEV_GATEWAY_PORT"],
  ];
  if (withProxy) ports.push([PROXY_PORT, "dev proxy", "RELAYCTL_DEV_PROXY_PORT"]);
  if (withProxy && PROXY_ADMIN_PORT)
    ports.push([PROXY_ADMIN_PORT, "dev proxy admin", "RELAYCTL_DEV_PROXY_ADMIN_PORT"]);
  for (const [port, what, variable] of ports) {
    if (!(await portIsFree(port))) {
      die(
        `port ${port} on 127.0.0.1 (${what}) is already in use — is another \`make dev\` running? Stop it or set ${variable}=<free port>`,
      );
    }
  }
}

// --- run -----------------------------------------------------------------------------------------

/** POST /exec of `command` with the dev key: [status, parsed body or null, text]. */
async function execThroughApi(state, command) {
  const res = await fetch(`${state.base_url}/api/automation/v1/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${state.automation_key}`, "content-type": "application/json" },
    body: JSON.stringify({ server_id: state.server_id, command, timeout_seconds: 30 }),
  });
  const text = await res.text();
  try {
    return [res.status, JSON.parse(text), text];
  } catch {
    return [res.status, null, text];
  }
}

/**
 * Ready means a script's first exec works: the agent said "connected", and an exec through the
 * API comes back completed. Until then a 409 (not connected yet) is retried; anything else stops.
 */
async function readyCheck(state) {
  const answer = await pollUntil(
    async () => {
      const [status, body, text] = await execThroughApi(state, "true");
      if (status === 409) return undefined;
      return { ok: status === 200 && body?.status === "completed", text: `${status} ${text}` };
    },
    { what: "a first exec through the API to complete", timeoutMs: READY_TIMEOUT_MS, intervalMs: 50 },
  );
  if (!answer.ok) throw new Error(`not ready: POST /exec \`true\` → ${answer.text}`);
}

async function smokeExec(state) {
  const [status, result, text] = await execThroughApi(state, "echo relayctl-dev-ok");
  say(`POST /api/automation/v1/exec \`echo relayctl-dev-ok\` → ${status} ${text}`);
  const ok =
    status === 200 &&
    result?.status === "completed" &&
    result.exit_code === 0 &&
    String(result.stdout).includes("relayctl-dev-ok");
  if (ok) return true;
  const hint =
    status === 401
      ? ` (the key in ${STATE_JSON} is not accepted; delete ${STATE_DIR} to start over)`
      : status >= 500
        ? ` (if ${STATE_DIR} was made by an older build, its database may predate a schema change: delete it to start over)`
        : "";
  await fail(
    `smoke check failed: expected 200, status completed, exit_code 0 and stdout "relayctl-dev-ok"${hint}`,
  );
  return false;
}

/** The smoke's deploy: examples/hello through the API, then its page through Caddy. */
async function smokeHello(dev) {
  const log = (m) => say(`hello: ${m}`);
  const app = await ensureHello(dev, REPO, log);
  await deployAndFollow(dev, app, log);
  const url = appUrl(app, dev);
  const page = await getThroughProxy(dev.proxy_url, url);
  say(`GET ${url} through ${dev.proxy_url} → ${page.status}, server: ${page.server || "-"}`);
  if (page.status !== 200 || !page.body.includes(HELLO_TEXT))
    throw new Error(`smoke check failed: expected 200 with "${HELLO_TEXT}", got ${page.body.slice(0, 200)}`);
  return shutdown(
    0,
    `smoke check passed: exec returned relayctl-dev-ok, and ${url} served "${HELLO_TEXT}" through Caddy`,
  );
}

/** Caddy when it is installed (a missing one is said, not fatal, except for --once). */
async function maybeStartProxy() {
  if (!caddyBinary()) {
    if (ONCE) die("the smoke check needs caddy (make test and make dev install it on Debian)");
    warn("caddy is not installed: no dev proxy, so deploys only record where each app listens");
    return null;
  }
  const adminPort = PROXY_ADMIN_PORT || (await freePort());
  const started = await startDevProxy({
    group,
    stateDir: STATE_DIR,
    port: PROXY_PORT,
    adminPort,
    print: printer("caddy", "34"),
    say,
    warn,
  });
  return { ...started, appsUrl: `http://{app}.localhost:${PROXY_PORT}` };
}

/** The agent's proxy settings: it writes the routes into the dev Caddy. */
function proxyAgentEnv(p) {
  if (!p) return {};
  return {
    RELAYCTL_AGENT_PROXY: "caddy",
    RELAYCTL_AGENT_CADDY_ADMIN_URL: p.adminUrl,
    RELAYCTL_AGENT_CADDY_LISTEN: p.listen,
    RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
  };
}

async function main() {
  if (!existsSync(AGENT_MAIN))
    die(`${AGENT_MAIN} is missing: build first (node scripts/dev-build.mjs; \`make dev\` does)`);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, onSignal);
  await checkPorts(Boolean(caddyBinary()));
  // A dev.json left by an earlier run (killed, or still starting) must not pass for this one's.
  rmSync(DEV_JSON, { force: true });

  let state = files.load();
  const gatewayUrl = `grpc://127.0.0.1:${GATEWAY_PORT}`;
  const serverEnv = {
    ...process.env,
    RELAYCTL_ROLE: "all",
    RELAYCTL_BUS: "memory",
    RELAYCTL_DATABASE_URL: `sqlite://${DB_FILE}`,
    RELAYCTL_API_LISTEN: `127.0.0.1:${API_PORT}`,
    RELAYCTL_GATEWAY_LISTEN: `127.0.0.1:${GATEWAY_PORT}`,
    RELAYCTL_PUBLIC_GATEWAY_URLS: gatewayUrl,
    // Dev deploys from repositories on this machine (a local path, a git server on localhost).
    RELAYCTL_ALLOW_LOCAL_GIT_SOURCES: process.env.RELAYCTL_ALLOW_LOCAL_GIT_SOURCES ?? "true",
  };
  let firstRun = null;
  if (!state) {
    await files.wipe();
    firstRun = await createTenantKeyAndJoinToken(serverEnv);
  } else if (!state.api_key) {
    // dev.json of a build before API keys: add one, keep the rest.
    state = { ...state, api_key: await createApiKey(serverEnv) };
    await files.write(state);
    say(`created an API key for tenant "${TENANT_NAME}"`);
  }

  const engine = await chooseEngine(STATE_DIR);
  if (!engine.name) {
    if (ONCE) die(`the smoke check needs a container engine: ${engine.why} (make test installs podman)`);
    warn(`no container engine: ${engine.why}; exec works, deploys fail until podman or docker is installed`);
  }
  // The base image builds while the rest starts (a first build takes a few seconds).
  const baseImage = engine.name ? ensureBaseImage(engine, STATE_DIR, say) : Promise.resolve("");
  proxy = await maybeStartProxy();
  if (proxy) serverEnv.RELAYCTL_APPS_URL = proxy.appsUrl;
  const owner = await withDb(serverEnv, (db) => ownerInvite(db, CONTROL_PLANE, TENANT_NAME));

  serverEnv.RELAYCTL_MASTER_KEY = await files.masterKey();
  controlPlane = await startControlPlane(serverEnv);
  const baseUrl = controlPlane.apiUrl ?? `http://127.0.0.1:${API_PORT}`;

  const agentEnv = {
    ...process.env,
    RELAYCTL_AGENT_STATE_DIR: AGENT_DIR,
    ...engine.env,
    ...proxyAgentEnv(proxy),
  };
  if (firstRun) {
    const enrollArgs = ["enroll", "--url", baseUrl, "--token", firstRun.joinToken, "--state-dir", AGENT_DIR];
    const { stdout } = await run(process.execPath, [AGENT_MAIN, ...enrollArgs], {
      env: agentEnv,
      cwd: REPO,
      timeoutMs: READY_TIMEOUT_MS,
    });
    const enrolled = jsonAnswer(stdout, "relayctl-agent enroll", "server_id");
    state = {
      base_url: baseUrl,
      automation_key: firstRun.key,
      api_key: firstRun.apiKey,
      server_id: enrolled.server_id,
      server_name: enrolled.server_name ?? SERVER_NAME,
    };
    await files.write(state);
    say(`enrolled server "${state.server_name}" (${state.server_id})`);
  } else if (state.base_url !== baseUrl || !existsSync(STATE_JSON)) {
    state = { ...state, base_url: baseUrl };
    await files.write(state);
  }

  // --gateway: the enrolled URL may name another port than this run's RELAYCTL_DEV_GATEWAY_PORT.
  const agent = startAgent(["run", "--state-dir", AGENT_DIR, "--gateway", gatewayUrl], agentEnv);
  await agent
    .waitForLine(
      (l) => l.json?.msg === "connected" && (!l.json.server_id || l.json.server_id === state.server_id),
      {
        what: '"connected"',
        timeoutMs: READY_TIMEOUT_MS,
      },
    )
    .catch((err) => {
      throw new Error(
        `${err.message.split("\n")[0]}: is the agent refused? if its credential is stale, delete ${STATE_DIR} to start over`,
      );
    });

  await readyCheck(state);
  const baseProblem = await baseImage;
  if (baseProblem) {
    if (ONCE) throw new Error(baseProblem);
    warn(`${baseProblem}; the sample will not build`);
  }
  const dev = {
    ...state,
    dashboard_url: `${state.base_url}/app/`,
    proxy_url: proxy?.url ?? null,
    apps_url: proxy?.appsUrl ?? null,
  };
  await files.writeDevJson(dev);
  say(`ready: wrote ${DEV_JSON}`);
  printReady({
    paint,
    repo: REPO,
    state,
    stateDir: STATE_DIR,
    gatewayUrl,
    owner,
    ownerTtlMs: OWNER_LINK_TTL_MS,
    proxy,
    engine,
    once: ONCE,
  });
  if (ONCE && (await smokeExec(state))) await smokeHello(dev);
}

main().catch((err) => fail(err.message));

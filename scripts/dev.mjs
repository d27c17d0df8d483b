#!/usr/bin/env node
// make dev: runs the control plane in this process (api + gateway, SQLite, in-process bus) and one
// local agent enrolled as server "local" as a child, prints both logs readably, and prints a curl
// that runs a command through the automation API. State lives in <repo>/.relayctl: dev.db, agent/
// and state.json (base_url, automation_key, api_key, server_id, server_name; mode 0600), reused by
// the next run.
//
// dev.json (the same fields) is the "ready" signal scripts wait for: it is removed at start and at
// stop, and written (atomically, 0600) only once the agent is connected and an exec through the
// API has come back completed, so a script that sees it gets a working exec on its first try.
//
//   node scripts/dev.mjs          run until Ctrl-C
//   node scripts/dev.mjs --once   smoke check: start, exec `echo relayctl-dev-ok`, stop (also RELAYCTL_DEV_SMOKE=1)
//
// RELAYCTL_DEV_PORT (default 8080) and RELAYCTL_DEV_GATEWAY_PORT (default 8443) move the listeners;
// RELAYCTL_DEV_DIR (default <repo>/.relayctl) moves the state.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ProcessGroup, jsonAnswer, logFormatter, pollUntil, run } from "@relayctl/devkit";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";

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

const ONCE = process.argv.includes("--once") || process.env.RELAYCTL_DEV_SMOKE === "1";
const STATE_DIR = resolve(process.env.RELAYCTL_DEV_DIR || join(REPO, ".relayctl"));
const DB_FILE = join(STATE_DIR, "dev.db");
const AGENT_DIR = join(STATE_DIR, "agent");
const DEV_JSON = join(STATE_DIR, "dev.json");
const STATE_JSON = join(STATE_DIR, "state.json");
const API_PORT = portFromEnv("RELAYCTL_DEV_PORT", 8080);
const GATEWAY_PORT = portFromEnv("RELAYCTL_DEV_GATEWAY_PORT", 8443);

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

// --- logs: pino-pretty through devkit's formatter (control characters escaped, fields capped) ---

const format = logFormatter({ colorize: COLOR });

/** Prints one output line of `name` (JSON or not), every physical line prefixed. */
function printer(name, color) {
  const prefix = paint(color, `[${name}]`);
  return (text) => process.stdout.write(`${prefix} ${format(text).replaceAll("\n", `\n${prefix} `)}\n`);
}

/** A pino destination: the control plane's JSON lines, printed readably. */
function prettyDestination(print) {
  let buffered = "";
  return {
    write(chunk) {
      buffered += chunk;
      let nl = buffered.indexOf("\n");
      while (nl >= 0) {
        print(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf("\n");
      }
    },
  };
}

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
async function checkPorts() {
  for (const [port, what, variable] of [
    [API_PORT, "API", "RELAYCTL_DEV_PORT"],
    [GATEWAY_PORT, "gateway", "RELAYCTL_DEV_GATEWAY_PORT"],
  ]) {
    if (!(await portIsFree(port))) {
      die(
        `port ${port} on 127.0.0.1 (${what}) is already in use — is another \`make dev\` running? Stop it or set ${variable}=<free port>`,
      );
    }
  }
}

/** state.json (dev.json of older runs) when the db and the enrolled agent it describes are still there, else null. */
function loadState() {
  const file = existsSync(STATE_JSON) ? STATE_JSON : existsSync(DEV_JSON) ? DEV_JSON : null;
  if (!file) return null;
  let state;
  try {
    state = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    say(`${file} is not valid JSON; starting over`);
    return null;
  }
  const missing = [
    [DB_FILE, "the database"],
    [join(AGENT_DIR, "agent.json"), "the agent's enrollment"],
  ].filter(([f]) => !existsSync(f));
  if (missing.length) {
    say(
      `${missing.map(([, w]) => w).join(" and ")} is gone (${missing.map(([f]) => f).join(", ")}); starting over`,
    );
    return null;
  }
  if (!state.automation_key || !state.server_id) {
    say(`${file} lacks automation_key or server_id; starting over`);
    return null;
  }
  return state;
}

/** Clears everything of an earlier, partial or stale run so the first run starts clean. */
async function wipeState() {
  for (const f of [
    DEV_JSON,
    STATE_JSON,
    DB_FILE,
    `${DB_FILE}-wal`,
    `${DB_FILE}-shm`,
    `${DB_FILE}-journal`,
    AGENT_DIR,
  ]) {
    await rm(f, { recursive: true, force: true });
  }
  await mkdir(STATE_DIR, { recursive: true, mode: 0o700 });
}

function writeState(state) {
  return writeFileAtomic(STATE_JSON, `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

/** The ready signal: only after readyCheck passed (see the header). */
function writeDevJson(state) {
  return writeFileAtomic(DEV_JSON, `${JSON.stringify(state, null, 2)}\n`, 0o600);
}

/**
 * The master key that encrypts stored registry credentials: made once per dev
 * state dir (0600) and reused, so credentials stored in one run decrypt in the next.
 */
async function devMasterKey() {
  const file = join(STATE_DIR, "master.key");
  if (existsSync(file)) return readFileSync(file, "utf8").trim();
  const key = randomBytes(32).toString("base64");
  await mkdir(STATE_DIR, { recursive: true, mode: 0o700 });
  await writeFileAtomic(file, `${key}\n`, 0o600);
  return key;
}

// --- run -----------------------------------------------------------------------------------------

function printReady(state, gatewayUrl) {
  const body = JSON.stringify({ server_id: state.server_id, command: "uname -a" });
  const curl = [
    `curl -s -X POST ${state.base_url}/api/automation/v1/exec`,
    `-H "Authorization: Bearer ${state.automation_key}"`,
    `-H 'Content-Type: application/json'`,
    `-d '${body}'`,
  ].join(" ");
  console.log(`
${paint("32;1", "relayctl is running")}
  API       ${state.base_url}
  gateway   ${gatewayUrl}
  server    ${state.server_name} (${state.server_id})
  state     ${STATE_DIR} (dev.json holds the automation key and an API key)

Run a command on the local server:
  ${curl}
${ONCE ? "" : "\nCtrl-C stops both.\n"}`);
}

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
  if (!ok) {
    const hint =
      status === 401
        ? ` (the key in ${STATE_JSON} is not accepted; delete ${STATE_DIR} to start over)`
        : status >= 500
          ? ` (if ${STATE_DIR} was made by an older build, its database may predate a schema change: delete it to start over)`
          : "";
    return fail(
      `smoke check failed: expected 200, status completed, exit_code 0 and stdout "relayctl-dev-ok"${hint}`,
    );
  }
  return shutdown(0, "smoke check passed: exec through the API returned relayctl-dev-ok");
}

async function main() {
  if (!existsSync(AGENT_MAIN))
    die(`${AGENT_MAIN} is missing: build first (node scripts/dev-build.mjs; \`make dev\` does)`);
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, onSignal);
  await checkPorts();
  // A dev.json left by an earlier run (killed, or still starting) must not pass for this one's.
  rmSync(DEV_JSON, { force: true });

  let state = loadState();
  const gatewayUrl = `grpc://127.0.0.1:${GATEWAY_PORT}`;
  const serverEnv = {
    ...process.env,
    RELAYCTL_ROLE: "all",
    RELAYCTL_BUS: "memory",
    RELAYCTL_DATABASE_URL: `sqlite://${DB_FILE}`,
    RELAYCTL_API_LISTEN: `127.0.0.1:${API_PORT}`,
    RELAYCTL_GATEWAY_LISTEN: `127.0.0.1:${GATEWAY_PORT}`,
    RELAYCTL_PUBLIC_GATEWAY_URLS: gatewayUrl,
  };
  let firstRun = null;
  if (!state) {
    await wipeState();
    firstRun = await createTenantKeyAndJoinToken(serverEnv);
  } else if (!state.api_key) {
    // dev.json of a build before API keys: add one, keep the rest.
    state = { ...state, api_key: await createApiKey(serverEnv) };
    await writeState(state);
    say(`created an API key for tenant "${TENANT_NAME}"`);
  }

  serverEnv.RELAYCTL_MASTER_KEY = await devMasterKey();
  controlPlane = await startControlPlane(serverEnv);
  const baseUrl = controlPlane.apiUrl ?? `http://127.0.0.1:${API_PORT}`;

  const agentEnv = { ...process.env, RELAYCTL_AGENT_STATE_DIR: AGENT_DIR };
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
    await writeState(state);
    say(`enrolled server "${state.server_name}" (${state.server_id})`);
  } else if (state.base_url !== baseUrl || !existsSync(STATE_JSON)) {
    state = { ...state, base_url: baseUrl };
    await writeState(state);
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
  await writeDevJson(state);
  say(`ready: wrote ${DEV_JSON}`);
  printReady(state, gatewayUrl);
  if (ONCE) await smokeExec(state);
}

main().catch((err) => fail(err.message));

#!/usr/bin/env node
// make dev: runs the control plane (api + gateway in one process, SQLite, in-process bus) and one
// local agent enrolled as server "local", forwards both logs, and prints a curl that runs a
// command through the automation API. State lives in <repo>/.relayctl: dev.db, agent/ and dev.json
// (base_url, automation_key, api_key, server_id, server_name; mode 0600), reused by the next run.
//
//   node scripts/dev.mjs          run until Ctrl-C
//   node scripts/dev.mjs --once   smoke check: start, exec `echo relayctl-dev-ok`, stop (also RELAYCTL_DEV_SMOKE=1)
//
// RELAYCTL_DEV_PORT (default 8080) and RELAYCTL_DEV_GATEWAY_PORT (default 8443) move the listeners;
// RELAYCTL_DEV_DIR (default <repo>/.relayctl) moves the state.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { dirname, join, resolve } from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SERVER_MAIN = join(REPO, "control-plane/dist/cli/main.js");
const AGENT_MAIN = join(REPO, "agent/dist/cli/main.js");
const SERVER_NAME = "local";
const TENANT_NAME = "dev";
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 8_000;

const COLOR = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (code, s) => (COLOR ? `\x1b[${code}m${s}\x1b[0m` : s);
const say = (msg) => console.log(`${paint("1", "[dev]")} ${msg}`);

const ONCE = process.argv.includes("--once") || process.env.RELAYCTL_DEV_SMOKE === "1";
const STATE_DIR = resolve(process.env.RELAYCTL_DEV_DIR || join(REPO, ".relayctl"));
const DB_FILE = join(STATE_DIR, "dev.db");
const AGENT_DIR = join(STATE_DIR, "agent");
const DEV_JSON = join(STATE_DIR, "dev.json");
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

// --- logs ------------------------------------------------------------------------------------

const LEVELS = {
  10: ["TRACE", "90"],
  20: ["DEBUG", "90"],
  30: ["INFO", "32"],
  40: ["WARN", "33"],
  50: ["ERROR", "31"],
  60: ["FATAL", "31;1"],
};
// Fields every line of a process carries, which say nothing in a prefixed dev log.
const QUIET_FIELDS = new Set(["level", "time", "msg", "pid", "hostname", "v", "err", "svc", "role"]);

/** One pino JSON line made readable: time, level, message, then the other fields as key=value. */
function prettyLine(text, json) {
  if (!json) return text;
  const [level, color] = LEVELS[json.level] ?? [String(json.level ?? ""), "0"];
  const when = new Date(json.time ?? Date.now());
  const time = (Number.isNaN(when.getTime()) ? new Date() : when).toTimeString().slice(0, 8);
  const fields = Object.entries(json)
    .filter(([k, v]) => !QUIET_FIELDS.has(k) && !(k === "name" && String(v).startsWith("relayctl-")))
    .map(([k, v]) => `${paint("2", `${k}=`)}${typeof v === "string" ? v : JSON.stringify(v)}`);
  let out =
    `${paint("2", time)} ${paint(color, level.padEnd(5))} ${json.msg ?? ""} ${fields.join(" ")}`.trimEnd();
  if (json.err)
    out += `\n    ${String(json.err.stack ?? json.err.message ?? JSON.stringify(json.err)).replaceAll("\n", "\n    ")}`;
  return out;
}

function parseJson(text) {
  if (!text.startsWith("{")) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// --- children --------------------------------------------------------------------------------

const children = [];
let stopping = false;

/** A long-running child whose log lines are forwarded with a prefix and can be waited on. */
function startChild(name, args, env, prefixColor) {
  // detached: Ctrl-C reaches only this script, which stops the agent first, then the control plane.
  const child = spawn(process.execPath, args, {
    cwd: REPO,
    env,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const entry = { name, child, waiters: new Set(), exit: null };
  const prefix = paint(prefixColor, `[${name}]`);
  const onLine = (text) => {
    const json = parseJson(text);
    process.stdout.write(`${prefix} ${prettyLine(text, json).replaceAll("\n", `\n${prefix} `)}\n`);
    for (const w of entry.waiters) w.line(json);
  };
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on("line", onLine);
  }
  const closed = new Promise((res) => child.on("close", res));
  entry.exited = new Promise((res) => {
    child.on("exit", async (code, signal) => {
      entry.exit = signal ? `signal ${signal}` : `exit code ${code}`;
      // Print its last log lines before saying it died (bounded: a grandchild may hold the pipes).
      await Promise.race([closed, new Promise((r) => setTimeout(r, 500))]);
      for (const w of entry.waiters) w.exit();
      res();
      if (!stopping) fail(`${name} exited unexpectedly (${entry.exit}); see its log lines above`);
    });
  });
  child.on("error", (err) => fail(`cannot start ${name}: ${err.message}`));
  children.push(entry);
  return entry;
}

/** Resolves with the first JSON log line of `entry` whose msg is `msg` (and that passes `test`). */
function waitForLog(entry, msg, hint, test = () => true) {
  return new Promise((res, rej) => {
    const w = {
      line: (json) => {
        if (json?.msg !== msg || !test(json)) return;
        done();
        res(json);
      },
      exit: () => {
        done();
        rej(new Error(`${entry.name} exited (${entry.exit}) before logging "${msg}"`));
      },
    };
    const timer = setTimeout(() => {
      done();
      rej(
        new Error(
          `${entry.name} did not log "${msg}" within ${READY_TIMEOUT_MS / 1000} s${hint ? `; ${hint}` : ""}`,
        ),
      );
    }, READY_TIMEOUT_MS);
    const done = () => {
      clearTimeout(timer);
      entry.waiters.delete(w);
    };
    entry.waiters.add(w);
  });
}

async function stopChild(entry) {
  if (entry.exit) return;
  const signal = (sig) => {
    try {
      process.kill(-entry.child.pid, sig);
    } catch {
      // already gone
    }
  };
  signal("SIGTERM");
  const timer = setTimeout(() => {
    say(`${entry.name} still running after ${STOP_GRACE_MS / 1000} s; killing it`);
    signal("SIGKILL");
  }, STOP_GRACE_MS);
  await entry.exited;
  clearTimeout(timer);
}

/** Stops the agent, then the control plane (newest first), then exits. */
async function shutdown(code, msg) {
  if (stopping) return;
  stopping = true;
  if (msg) (code === 0 ? say : (m) => console.error(`${paint("31;1", "[dev]")} ${m}`))(msg);
  for (const entry of [...children].reverse()) await stopChild(entry);
  process.exit(code);
}

const fail = (msg) => shutdown(1, msg);

function killAll() {
  for (const entry of children) {
    if (entry.exit) continue;
    try {
      process.kill(-entry.child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

function onSignal(sig) {
  if (!stopping) return shutdown(0, `${sig}: stopping the agent and the control plane`);
  // A second Ctrl-C while stopping: do not make anyone wait.
  killAll();
  process.exit(130);
}

// --- one-shot commands -----------------------------------------------------------------------

/** Runs `node <args>` to completion; resolves with its stdout, rejects with its last lines. */
function runNode(label, args, env) {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, args, { cwd: REPO, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", rej);
    child.on("close", (code, signal) => {
      if (code === 0) return res(stdout);
      const out = (stderr.trim() || stdout.trim()).split("\n").slice(-10).join("\n  ");
      rej(new Error(`${label} failed (${signal ?? `exit code ${code}`}):\n  ${out}`));
    });
  });
}

/** Runs `node <args>` and returns the JSON object it printed that has `field` (admin commands, enroll). */
async function runJson(label, args, env, field) {
  const stdout = await runNode(label, args, env);
  for (const line of stdout.trim().split("\n").reverse()) {
    const json = parseJson(line.trim());
    if (json && field in json) return json;
  }
  throw new Error(`${label} printed no JSON with "${field}":\n  ${stdout.trim()}`);
}

// --- setup -----------------------------------------------------------------------------------

function portIsFree(port) {
  return new Promise((res) => {
    const srv = net.createServer();
    srv.once("error", () => res(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => res(true)));
  });
}

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

/** dev.json when the db and the enrolled agent it describes are still there, else null. */
function loadState() {
  if (!existsSync(DEV_JSON)) return null;
  let state;
  try {
    state = JSON.parse(readFileSync(DEV_JSON, "utf8"));
  } catch {
    say(`${DEV_JSON} is not valid JSON; starting over`);
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
    say(`${DEV_JSON} lacks automation_key or server_id; starting over`);
    return null;
  }
  return state;
}

/** Clears everything of an earlier, partial or stale run so the first run starts clean. */
async function wipeState() {
  for (const f of [DEV_JSON, DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, `${DB_FILE}-journal`, AGENT_DIR]) {
    await rm(f, { recursive: true, force: true });
  }
  await mkdir(STATE_DIR, { recursive: true, mode: 0o700 });
}

async function writeDevJson(state) {
  await writeFile(DEV_JSON, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await chmod(DEV_JSON, 0o600);
}

async function createTenantKeyAndJoinToken(env) {
  say(
    `first run: creating tenant "${TENANT_NAME}", an automation key and a join token for server "${SERVER_NAME}"`,
  );
  await runNode("relayctl-server migrate", [SERVER_MAIN, "migrate"], env);
  const tenant = await runJson(
    "admin create-tenant",
    [SERVER_MAIN, "admin", "create-tenant", "--name", TENANT_NAME],
    env,
    "tenant_id",
  );
  const key = await runJson(
    "admin create-automation-key",
    [SERVER_MAIN, "admin", "create-automation-key", "--tenant", tenant.tenant_id, "--name", "dev"],
    env,
    "key",
  );
  const apiKey = await createApiKey(env);
  const token = await runJson(
    "admin create-join-token",
    [SERVER_MAIN, "admin", "create-join-token", "--tenant", tenant.tenant_id, "--server-name", SERVER_NAME],
    env,
    "join_token",
  );
  return { key: key.key, apiKey, joinToken: token.join_token };
}

/** A regular API key (X-API-Key) of the dev tenant, for the management API (/api/...). */
async function createApiKey(env) {
  const out = await runJson(
    "admin create-api-key",
    [SERVER_MAIN, "admin", "create-api-key", "--tenant", TENANT_NAME, "--name", "dev"],
    env,
    "key",
  );
  return out.key;
}

// --- run -------------------------------------------------------------------------------------

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

async function smokeExec(state) {
  const res = await fetch(`${state.base_url}/api/automation/v1/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${state.automation_key}`, "content-type": "application/json" },
    body: JSON.stringify({
      server_id: state.server_id,
      command: "echo relayctl-dev-ok",
      timeout_seconds: 30,
    }),
  });
  const text = await res.text();
  say(`POST /api/automation/v1/exec \`echo relayctl-dev-ok\` → ${res.status} ${text}`);
  let result = null;
  try {
    result = JSON.parse(text);
  } catch {
    // reported below
  }
  const ok =
    res.status === 200 &&
    result?.status === "completed" &&
    result.exit_code === 0 &&
    String(result.stdout).includes("relayctl-dev-ok");
  if (!ok) {
    const hint =
      res.status === 401
        ? ` (the key in ${DEV_JSON} is not accepted; delete ${STATE_DIR} to start over)`
        : res.status >= 500
          ? ` (if ${STATE_DIR} was made by an older build, its database may predate a schema change: delete it to start over)`
          : "";
    return fail(
      `smoke check failed: expected 200, status completed, exit_code 0 and stdout "relayctl-dev-ok"${hint}`,
    );
  }
  return shutdown(0, "smoke check passed: exec through the API returned relayctl-dev-ok");
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
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}

async function main() {
  for (const f of [SERVER_MAIN, AGENT_MAIN]) {
    if (!existsSync(f)) die(`${f} is missing: build first (npx tsc -b; \`make dev\` does)`);
  }
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(sig, onSignal);
  // Last resort if this script itself crashes: children run detached and would outlive it.
  process.on("exit", killAll);
  await checkPorts();

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
    await writeDevJson(state);
    say(`created an API key for tenant "${TENANT_NAME}"; wrote ${DEV_JSON}`);
  }

  serverEnv.RELAYCTL_MASTER_KEY = await devMasterKey();
  const server = startChild("control-plane", [SERVER_MAIN, "serve"], serverEnv, "36");
  const listening = await waitForLog(server, "api listening", "see the control-plane log above");
  const baseUrl = listening.url ?? `http://127.0.0.1:${API_PORT}`;

  const agentEnv = { ...process.env, RELAYCTL_AGENT_STATE_DIR: AGENT_DIR };
  if (firstRun) {
    const enrolled = await runJson(
      "relayctl-agent enroll",
      [AGENT_MAIN, "enroll", "--url", baseUrl, "--token", firstRun.joinToken, "--state-dir", AGENT_DIR],
      agentEnv,
      "server_id",
    );
    state = {
      base_url: baseUrl,
      automation_key: firstRun.key,
      api_key: firstRun.apiKey,
      server_id: enrolled.server_id,
      server_name: enrolled.server_name ?? SERVER_NAME,
    };
    await writeDevJson(state);
    say(`enrolled server "${state.server_name}" (${state.server_id}); wrote ${DEV_JSON}`);
  } else if (state.base_url !== baseUrl) {
    state = { ...state, base_url: baseUrl };
    await writeDevJson(state);
  }

  // --gateway: the enrolled URL may name another port than this run's RELAYCTL_DEV_GATEWAY_PORT.
  const agent = startChild(
    "agent",
    [AGENT_MAIN, "run", "--state-dir", AGENT_DIR, "--gateway", gatewayUrl],
    agentEnv,
    "35",
  );
  await waitForLog(
    agent,
    "connected",
    `is the agent refused? if its credential is stale, delete ${STATE_DIR} to start over`,
    (json) => !json.server_id || json.server_id === state.server_id,
  );

  printReady(state, gatewayUrl);
  if (ONCE) await smokeExec(state);
}

main().catch((err) => fail(err.message));

#!/usr/bin/env node
// Deployments end to end (issue 11): the time from POST /api/automation/v1/deploy to the new
// version answering through Caddy, against the same steps run by a plain shell script
// (deploy-baseline.sh: git fetch, podman build, podman run, health-check poll, one Caddy /load)
// in the same run, interleaved, as a ratio; then the failed requests a steady request stream sees
// during 10 deploys in a row; then pairs of deploys back to back (the second POSTed as soon as the
// first completed, while its old container still drains), the second's time to serve against the
// first's (issue 29: the second waited for the first's drain). The agent drains for its default
// 5 s, what a user gets, so a wait for the drain would show. Starts nats-server, MariaDB, two
// Caddies (the agent's and the script's), api, gateway and agent on free loopback ports in a
// temp dir, builds every image FROM a local busybox image (nothing is pulled), and removes all of
// it on exit. Writes bench/results/deploy.json.
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { copyFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { intEnv, log, machine, runBench, writeResults } from "./lib/bench-run.mjs";
import { startCaddy } from "./lib/caddy.mjs";
import { freePort, run as runCmd } from "./lib/processes.mjs";
import { startRelayctl } from "./lib/relayctl-stack.mjs";
import { formatTable, ratio, summarize } from "./lib/stats.mjs";
import { startMariadb, startNats } from "./lib/throwaway-servers.mjs";
import { proxyGet, startTraffic } from "@relayctl/devkit";

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const RESULTS_FILE = join(BENCH_DIR, "results", "deploy.json");
const BASELINE_SCRIPT = join(BENCH_DIR, "deploy-baseline.sh");
const BENCH = "deploy";

const ITERATIONS = intEnv(BENCH, "BENCH_ITERATIONS", 5);
const WARMUP = intEnv(BENCH, "BENCH_WARMUP", 1);
const IN_A_ROW = intEnv(BENCH, "BENCH_DEPLOYS_IN_A_ROW", 10);
const PAIRS = intEnv(BENCH, "BENCH_BACK_TO_BACK_PAIRS", 3);
const ROLLBACKS = intEnv(BENCH, "BENCH_ROLLBACKS", 4);
/** Issue 29: from POST /rollback to the old version serving through the proxy. */
const ROLLBACK_GOAL_MS = 3000;
/** The agent's default (RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS): untimed everywhere but back to back. */
const DRAIN_SECONDS = 5;
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL || "info";
/** Issue 34, goal 4: a deploy at most as long as the plain script. */
const GOAL_MAX_RATIO = 1.0;
/**
 * 1 (default): the agent reaches podman through \`podman system service\` (CONTAINER_HOST), as
 * where podman.socket runs: the deployment's run, inspect and remove go through the API
 * (agent/src/engine/api-engine.ts), and podman's own CLI calls go to the service too. 0: no socket.
 */
const ENGINE_API = (process.env.BENCH_ENGINE_API ?? "1") !== "0";
/** Issue 29: the second of two deploys back to back against the first. */
const B2B_MAX_RATIO = 1.2;
const STEPS = ["fetch", "build", "start", "health_check", "switch"];
/** How often both sides look at Caddy for the new version (fresh connection each time). */
const ANSWER_POLL_MS = 20;
const DEPLOY_TIMEOUT_S = 300;

const CONTAINERS_CONF = "/tmp/relayctl-bench-containers.conf";
const BASE_IMAGE = "localhost/relayctl-bench-busybox:1";
const SCRIPT_PREFIX = `relayctl-bench-script-${process.pid}`;
const env = { ...process.env, CONTAINERS_CONF };
const podman = (args) => runCmd("podman", args, { env });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- the application and its repository -------------------------------------------------------

async function buildBaseImage(tmp) {
  writeFileSync(CONTAINERS_CONF, '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n');
  const ctx = join(tmp, "base");
  mkdirSync(ctx);
  copyFileSync("/bin/busybox", join(ctx, "busybox"));
  writeFileSync(join(ctx, "Containerfile"), "FROM scratch\nCOPY busybox /bin/busybox\n");
  await podman(["build", "-q", "-t", BASE_IMAGE, ctx]);
}

/** A git repository whose main branch is a busybox httpd app serving `version <label>`. */
function createRepo(dir) {
  const git = (...args) =>
    execFileSync("git", args, {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    })
      .toString()
      .trim();
  mkdirSync(join(dir, "www"), { recursive: true });
  writeFileSync(
    join(dir, "Dockerfile"),
    `FROM ${BASE_IMAGE}\nCOPY www /www\nCMD ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"]\n`,
  );
  git("init", "-q", "-b", "main");
  git("config", "user.name", "Bench");
  git("config", "user.email", "bench@relayctl.test");
  const commit = (label) => {
    writeFileSync(join(dir, "www", "index.html"), `version ${label}`);
    // Files no earlier run built: podman's layer cache keeps what a build of the same files left
    // (images carry no per-deployment label), and a label repeats from run to run.
    writeFileSync(join(dir, "www", "nonce"), randomUUID());
    git("add", "-A");
    git("commit", "-q", "-m", `Release ${label}`);
    return { sha: git("rev-parse", "HEAD"), body: `version ${label}` };
  };
  return { path: dir, commit };
}

// --- HTTP to the control plane ---------------------------------------------------------------

async function call(baseUrl, method, path, { bearer, apiKey, body } = {}) {
  const headers = {};
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (apiKey) headers["x-api-key"] = apiKey;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(new URL(path, baseUrl), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
}

function expect(res, status, what) {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status}: ${res.text}`);
  return res.json;
}

async function waitOperation(stack, id) {
  for (;;) {
    const op = expect(
      await call(stack.baseUrl, "GET", `/api/automation/v1/operations/${id}`, { bearer: stack.keys[0] }),
      200,
      "GET operation",
    );
    if (op.status !== "running") return op;
    await sleep(250);
  }
}

/** Polls Caddy with `Host: fqdn` until it answers `body`; ms since `t0`. */
async function waitForAnswer(port, fqdn, body, t0, deadlineMs = DEPLOY_TIMEOUT_S * 1000) {
  for (;;) {
    const res = await proxyGet(port, fqdn).catch(() => undefined);
    if (res?.status === 200 && res.body === body) return performance.now() - t0;
    if (performance.now() - t0 > deadlineMs) throw new Error(`${fqdn} never answered ${body}`);
    await sleep(ANSWER_POLL_MS);
  }
}

// --- one relayctl deployment and one script run ------------------------------------------------

/** POST /deploy of a new commit; resolves once it serves and its operation completed, with the ms to serve. */
async function postAndServe(ctx, label) {
  const { stack, app, repo, caddy } = ctx;
  const { sha, body } = repo.commit(label);
  const t0 = performance.now();
  const started = expect(
    await call(stack.baseUrl, "POST", "/api/automation/v1/deploy", {
      bearer: stack.keys[0],
      body: { application_id: app.id, timeout_seconds: DEPLOY_TIMEOUT_S },
    }),
    202,
    "POST /deploy",
  );
  const ms = await waitForAnswer(caddy.httpPort, app.fqdn, body, t0);
  const op = await waitOperation(stack, started.operation_id);
  if (op.status !== "completed") throw new Error(`deploy ${label}: ${JSON.stringify(op)}`);
  return { ms, sha, body, started };
}

async function deployWithRelayctl(ctx, label) {
  const { ms, sha, started } = await postAndServe(ctx, label);
  // Untimed: the view with each step's duration, once the old container is retired.
  const view = await retired(ctx, started.deployment_id);
  if (view.commit_sha !== sha) throw new Error(`deployed ${view.commit_sha}, committed ${sha}`);
  return { ms, steps: Object.fromEntries(view.steps.map((s) => [s.name, s.duration_ms])) };
}

/** The deployment's view once its retire step succeeded (its old container is gone). */
async function retired(ctx, deploymentId) {
  const { stack, app } = ctx;
  const path = `/api/tenants/${stack.tenantId}/applications/${app.id}/deployments/${deploymentId}`;
  for (;;) {
    const view = expect(
      await call(stack.baseUrl, "GET", path, { apiKey: ctx.nextApiKey() }),
      200,
      "GET deployment",
    );
    if (view.steps.find((s) => s.name === "retire")?.status === "succeeded") return view;
    await sleep(300);
  }
}

function runScript(vars) {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [BASELINE_SCRIPT], { env: { ...env, ...vars } });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.stderr.on("data", (d) => {
      err += d;
    });
    child.on("close", (code) =>
      code === 0 ? resolve(out) : reject(new Error(`deploy-baseline.sh exited ${code}: ${err}`)),
    );
  });
}

/** Step durations from the script's "mark <step> <epoch ms>" lines. */
function scriptSteps(out) {
  const marks = [...out.matchAll(/^mark (\w+) (\d+)$/gm)].map((m) => [m[1], Number(m[2])]);
  const steps = {};
  for (let i = 1; i < marks.length; i++) steps[marks[i][0]] = marks[i][1] - marks[i - 1][1];
  return steps;
}

async function deployWithScript(ctx, label, i) {
  const { repo, scriptCaddy } = ctx;
  const { body } = repo.commit(label);
  const name = `${SCRIPT_PREFIX}-${i}`;
  const vars = {
    REPO: repo.path,
    CACHE: ctx.scriptCache,
    IMAGE: `localhost/${SCRIPT_PREFIX}`,
    NAME: name,
    PORT: String(await freePort()),
    CADDY_ADMIN_PORT: new URL(scriptCaddy.adminUrl).port,
    CADDY_HTTP_PORT: String(scriptCaddy.httpPort),
    FQDN: ctx.scriptFqdn,
  };
  const t0 = performance.now();
  const [ms, out] = await Promise.all([
    waitForAnswer(scriptCaddy.httpPort, ctx.scriptFqdn, body, t0),
    runScript(vars),
  ]);
  // Untimed, like relayctl's retire: the previous container goes.
  if (ctx.scriptPrevious) await podman(["rm", "-f", "-t", "0", ctx.scriptPrevious]);
  ctx.scriptPrevious = name;
  return { ms, steps: scriptSteps(out) };
}

// --- the two parts ------------------------------------------------------------------------------

async function compare(ctx) {
  const samples = { relayctl: [], script: [], relayctlSteps: [], scriptSteps: [] };
  log(`time to serve: ${WARMUP} warmup + ${ITERATIONS} timed, each a relayctl deploy and a script run`);
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    const r = await deployWithRelayctl(ctx, `r${i}`);
    const s = await deployWithScript(ctx, `s${i}`, i);
    log(
      `#${i}${i < WARMUP ? " (warmup)" : ""}: relayctl ${r.ms.toFixed(0)} ms, script ${s.ms.toFixed(0)} ms`,
    );
    if (i < WARMUP) continue;
    samples.relayctl.push(r.ms);
    samples.script.push(s.ms);
    samples.relayctlSteps.push(r.steps);
    samples.scriptSteps.push(s.steps);
  }
  const stepSummary = (list) =>
    Object.fromEntries(STEPS.map((s) => [s, summarize(list.map((x) => x[s]).filter((v) => v != null))]));
  return {
    relayctl: summarize(samples.relayctl),
    script: summarize(samples.script),
    relayctl_steps: stepSummary(samples.relayctlSteps),
    script_steps: stepSummary(samples.scriptSteps),
  };
}

async function inARow(ctx) {
  log(`${IN_A_ROW} deploys in a row under a steady request stream`);
  const traffic = startTraffic(ctx.caddy.httpPort, ctx.app.fqdn);
  const t0 = performance.now();
  let last;
  for (let i = 0; i < IN_A_ROW; i++) last = await deployWithRelayctl(ctx, `row${i}`);
  const seconds = (performance.now() - t0) / 1000;
  const report = await traffic.stop();
  log(`${report.total} requests, ${report.failed} failed, ${report.sequence.length} versions seen`);
  return { deploys: IN_A_ROW, seconds: Number(seconds.toFixed(1)), last_ms: last?.ms, ...report };
}

/**
 * Pairs of deploys back to back: the first from rest (the previous retire ended), the second
 * POSTed as soon as the first completed; each pair ends once the second's retire ended.
 */
async function backToBack(ctx) {
  log(`${PAIRS} pairs of deploys back to back (drain ${DRAIN_SECONDS} s)`);
  const first = [];
  const second = [];
  for (let i = 0; i < PAIRS; i++) {
    const a = await postAndServe(ctx, `pair${i}a`);
    const b = await deployWithRelayctl(ctx, `pair${i}b`);
    log(`pair #${i}: first ${a.ms.toFixed(0)} ms, second ${b.ms.toFixed(0)} ms`);
    first.push(a.ms);
    second.push(b.ms);
  }
  return { pairs: PAIRS, drain_seconds: DRAIN_SECONDS, first: summarize(first), second: summarize(second) };
}

/**
 * Rollbacks under a steady request stream: two releases A and B, then each
 * rollback to the previous release (A, then B again, ...), timed from POST
 * /rollback to the old version answering through Caddy; the next one starts
 * once the previous operation completed (its retire goes on in the background).
 */
async function rollbacks(ctx) {
  log(`${ROLLBACKS} rollbacks to the previous release under a steady request stream`);
  const { stack, app, caddy } = ctx;
  const a = await postAndServe(ctx, "rollback-a");
  const b = await postAndServe(ctx, "rollback-b");
  const bodies = [a.body, b.body];
  const traffic = startTraffic(caddy.httpPort, app.fqdn);
  const times = [];
  let last;
  for (let i = 0; i < ROLLBACKS; i++) {
    const want = bodies[i % 2];
    const t0 = performance.now();
    const started = expect(
      await call(stack.baseUrl, "POST", "/api/automation/v1/rollback", {
        bearer: stack.keys[0],
        body: { application_id: app.id, timeout_seconds: DEPLOY_TIMEOUT_S },
      }),
      202,
      "POST /rollback",
    );
    const ms = await waitForAnswer(caddy.httpPort, app.fqdn, want, t0);
    const op = await waitOperation(stack, started.operation_id);
    if (op.status !== "completed") throw new Error(`rollback #${i}: ${JSON.stringify(op)}`);
    log(`rollback #${i}: ${ms.toFixed(0)} ms to serve ${want}`);
    times.push(ms);
    last = started.deployment_id;
  }
  const report = await traffic.stop();
  // The last retire ends before the clean-up removes what is left (it would race its removal).
  if (last) await retired(ctx, last);
  log(`${report.total} requests, ${report.failed} failed during the rollbacks`);
  return {
    rollbacks: ROLLBACKS,
    releases: [a.sha, b.sha],
    ...summarize(times),
    requests: report.total,
    failed: report.failed,
  };
}

// --- report --------------------------------------------------------------------------------------

function tcpMigrateReq() {
  const file = "/proc/sys/net/ipv4/tcp_migrate_req";
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "absent";
}

function report(result) {
  const { compare: c, in_a_row: row, back_to_back: b2b, rollback: rb } = result;
  const rows = [["measure", "n", "p50 ms", "p99 ms", "mean ms", "p50 / script p50"]];
  for (const [key, label] of [
    ["relayctl", "POST /deploy → new version through Caddy"],
    ["script", "deploy-baseline.sh → new version through Caddy"],
  ]) {
    const r = c[key];
    rows.push([
      label,
      r.n,
      r.p50_ms.toFixed(0),
      r.p99_ms.toFixed(0),
      r.mean_ms.toFixed(0),
      ratio(r.p50_ms, c.script.p50_ms),
    ]);
  }
  for (const s of STEPS) {
    rows.push([
      `  step ${s}: relayctl / script`,
      "",
      `${c.relayctl_steps[s].p50_ms} / ${c.script_steps[s].p50_ms}`,
      "",
      "",
      "",
    ]);
  }
  console.log(`\n${formatTable(rows)}\n`);
  console.log(
    `${row.deploys} deploys in a row: ${row.total} requests, ${row.failed} failed, ${row.stale} stale, ` +
      `versions ${row.sequence.length} (net.ipv4.tcp_migrate_req=${result.tcp_migrate_req})`,
  );
  console.log(
    `back to back (${b2b.pairs} pairs, drain ${b2b.drain_seconds} s): first p50 ${b2b.first.p50_ms.toFixed(0)} ms, ` +
      `second p50 ${b2b.second.p50_ms.toFixed(0)} ms (max ${b2b.second.max_ms.toFixed(0)} ms)`,
  );
  console.log(
    `rollback (${rb.rollbacks}, POST → old version serving): p50 ${rb.p50_ms.toFixed(0)} ms, max ${rb.max_ms.toFixed(0)} ms; ` +
      `${rb.requests} requests, ${rb.failed} failed`,
  );
  const value = ratio(c.relayctl.p50_ms, c.script.p50_ms);
  const b2bRatio = ratio(b2b.second.p50_ms, b2b.first.p50_ms);
  const goals = [
    {
      name: `time to serve p50 <= ${GOAL_MAX_RATIO} x the script's p50`,
      value,
      limit: GOAL_MAX_RATIO,
      met: value <= GOAL_MAX_RATIO,
    },
    {
      name: `back to back: second/first ≤ ${B2B_MAX_RATIO}× (POST → serving, p50)`,
      value: b2bRatio,
      limit: B2B_MAX_RATIO,
      met: b2bRatio <= B2B_MAX_RATIO,
    },
    {
      name: `rollback: POST → old version serving ≤ ${ROLLBACK_GOAL_MS} ms (max of ${rb.rollbacks})`,
      value: Math.round(rb.max_ms),
      limit: ROLLBACK_GOAL_MS,
      met: rb.max_ms <= ROLLBACK_GOAL_MS,
    },
    {
      name: `failed requests during ${rb.rollbacks} rollbacks = 0`,
      value: rb.failed,
      limit: 0,
      met: rb.failed === 0,
    },
    {
      name: `failed requests during ${row.deploys} deploys in a row = 0`,
      value: row.failed,
      limit: 0,
      met: row.failed === 0,
    },
  ];
  for (const g of goals) console.log(`goal: ${g.name}: ${g.value} → ${g.met ? "MET" : "NOT MET"}`);
  return goals;
}

/** \`podman system service\` on a socket in the temp dir, ready when GET /_ping answers. */
async function startPodmanApi(group, tmp) {
  const socketPath = join(tmp, "podman.sock");
  group.start("podman-api", "podman", ["system", "service", "--time=0", `unix://${socketPath}`], { env });
  const ping = () =>
    new Promise((resolve) => {
      const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200));
      });
      req.on("error", () => resolve(false));
    });
  const deadline = Date.now() + 15_000;
  while (!(await ping())) {
    if (Date.now() > deadline) throw new Error(`podman system service did not answer on ${socketPath}`);
    await sleep(50);
  }
  return socketPath;
}

// --- main ------------------------------------------------------------------------------------------

async function run(group, tmp) {
  log("building the base image; starting nats-server, MariaDB and two Caddies");
  await buildBaseImage(tmp);
  const [nats, db, caddy, scriptCaddy] = await Promise.all([
    startNats(group, tmp),
    startMariadb(group, tmp),
    startCaddy(group, tmp, "caddy"),
    startCaddy(group, tmp, "caddy-script"),
  ]);
  const engineSocket = ENGINE_API ? await startPodmanApi(group, tmp) : undefined;
  const stack = await startRelayctl(group, tmp, {
    natsUrl: nats.url,
    databaseUrl: db.url,
    keyCount: 1,
    keyRateLimit: 1000,
    apiKeyCount: 3,
    logLevel: LOG_LEVEL,
    agentEnv: {
      RELAYCTL_AGENT_CONTAINER_ENGINE: "podman",
      CONTAINERS_CONF,
      RELAYCTL_AGENT_PROXY: "caddy",
      RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
      RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
      RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
      RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: String(DRAIN_SECONDS),
      ...(engineSocket ? { CONTAINER_HOST: `unix://${engineSocket}` } : {}),
    },
  });
  const repo = createRepo(join(tmp, "app"));
  repo.commit("0");
  const scriptCache = join(tmp, "script-cache");
  execFileSync("git", ["init", "-q", "--bare", scriptCache]);
  let k = 0;
  const nextApiKey = () => stack.apiKeys[k++ % stack.apiKeys.length];
  const created = expect(
    await call(stack.baseUrl, "POST", "/api/applications", {
      apiKey: nextApiKey(),
      body: {
        server_id: stack.serverId,
        name: "bench-app",
        linked_container_name: "bench-app",
        container_port: 8080,
        fqdns: ["app.deploy.bench.test"],
        git_repository: repo.path,
        build: { type: "dockerfile" },
        health_check_timeout_seconds: 120,
      },
    }),
    201,
    "POST /api/applications",
  );
  const app = { id: created.id, fqdn: "app.deploy.bench.test" };
  const ctx = {
    stack,
    app,
    repo,
    caddy,
    scriptCaddy,
    scriptCache,
    scriptFqdn: "script.deploy.bench.test",
    nextApiKey,
  };
  try {
    const result = { compare: await compare(ctx) };
    result.in_a_row = await inARow(ctx);
    result.back_to_back = await backToBack(ctx);
    result.rollback = await rollbacks(ctx);
    return result;
  } finally {
    await removeContainers(app.id);
  }
}

async function removeContainers(appId) {
  const ids = async (args) => (await podman(args)).stdout.split("\n").filter(Boolean);
  const label = `label=relayctl.application=${appId}`;
  const containers = [
    ...(await ids(["ps", "-a", "-q", "--filter", label])),
    ...(await ids(["ps", "-a", "-q", "--filter", `name=${SCRIPT_PREFIX}`])),
  ];
  if (containers.length) await podman(["rm", "-f", "-t", "0", ...containers]);
  // By tag: the agent's built images carry no label (agent/src/deploy/image-ledger.ts), and
  // an image of the same files may be another user's of the machine's podman under its own tag.
  const ours = [`localhost/relayctl/${appId}:`, `localhost/${SCRIPT_PREFIX}:`];
  const images = (await ids(["images", "--format", "{{.Repository}}:{{.Tag}}"])).filter((r) =>
    ours.some((p) => r.startsWith(p)),
  );
  if (images.length) await podman(["rmi", "-f", ...new Set(images)]);
}

async function main() {
  const result = await runBench(BENCH, run);
  result.tcp_migrate_req = tcpMigrateReq();
  const goals = report(result);
  const doc = {
    bench: BENCH,
    ...machine(),
    config: {
      iterations: ITERATIONS,
      warmup: WARMUP,
      deploys_in_a_row: IN_A_ROW,
      back_to_back_pairs: PAIRS,
      engine_api: ENGINE_API,
      rollbacks: ROLLBACKS,
      drain_seconds: DRAIN_SECONDS,
      answer_poll_ms: ANSWER_POLL_MS,
      log_level: LOG_LEVEL,
      tcp_migrate_req: result.tcp_migrate_req,
    },
    results: result,
    goals,
    goals_met: goals.every((g) => g.met),
  };
  await writeResults(RESULTS_FILE, doc);
  if (process.env.BENCH_STRICT === "1" && !doc.goals_met) process.exit(3);
}

await main();

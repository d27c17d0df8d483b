#!/usr/bin/env node
// Quickstart: how long a new user waits from `git clone` to a first exec answered through the API,
// and where the time goes (issue 26, item 6; goal: <= 90 s). It clones this checkout's HEAD into a
// temp dir, runs `make dev` there as a fresh machine would — an empty npm cache (npm_config_cache
// points at an empty temp dir, so `npm ci` and the Node fetch download everything), no .tools/
// (a clone has none: the Makefile fetches Node 24 when the machine's node is older), free ports —
// and times each phase from the output: every line is stamped with the time it was read.
//
//   node bench/quickstart.mjs                 one run; table, goal line, bench/results/quickstart.json
//   BENCH_KEEP=1 node bench/quickstart.mjs    keep the temp dir (the clone, its log) to look at
//   BENCH_TIMEOUT_S=600                       give up after this long (default 600)
//
// Phases (each ends where the next one's first line is read; "-" when its line never came):
//   clone             git clone --no-local of HEAD (a full copy, no hardlinks, like a network clone),
//                     and make's start until its first line
//   node fetch        scripts/node-runtime.sh fetching node-linux-<arch> into .tools/ ("[node] ...")
//   npm ci            `npm ci` of the lockfile into an empty cache
//   system packages   scripts/system-deps.sh ("installing Debian packages"); 0 when all are there
//   build             from npm ci's summary: scripts/dev-build.mjs (esbuild) and the dashboard (web/)
//   control plane     dev.mjs from its start until the API listens
//   agent connected   the agent's enrolment (first run), start and dial, until its "connected" line
//   first exec        until .relayctl/dev.json exists: dev.mjs writes it only once an exec through
//                     the API came back completed; the bench then sends one exec of its own
//                     and checks its answer (its round trip is reported apart, not in the total)
// The clone's `make dev` is then stopped (SIGINT to its process group, SIGKILL after a grace) and
// the temp dir removed.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import { cpus, tmpdir, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const RESULTS = join(REPO, "bench", "results", "quickstart.json");
const GOAL_S = 90;
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_S || 600) * 1000;
const STOP_GRACE_MS = 15_000;
const KEEP = process.env.BENCH_KEEP === "1";

/**
 * The marks, in the order they happen: the first output line matching `line` starts the phase.
 * Patterns follow what the Makefile, scripts/node-runtime.sh, system-deps.sh and dev.mjs print.
 */
const PHASES = [
  { name: "node fetch", line: /^\[node\] .*fetching Node\.js/ },
  { name: "npm ci", line: /^npm ci\b/ },
  { name: "system packages", line: /^installing Debian packages|scripts\/system-deps\.sh/ },
  // npm ci's summary line ends it; dev-build.mjs (silent in the Makefile) prints only when done.
  { name: "build", line: /^added \d+ packages|dev-build\.mjs|^\[dev\] transpiled/ },
  { name: "control plane", line: /^node scripts\/dev\.mjs/ },
  // From the control plane's API up: the agent's enrolment (first run), its start and its dial.
  { name: "agent connected", line: /api listening/ },
  { name: "first exec", line: /\(relayctl-agent\): connected\b|"msg":"connected"/ },
];

const sec = (ms) => (ms === null ? "-" : (ms / 1000).toFixed(1));
const say = (msg) => console.log(`[quickstart] ${msg}`);

function freePort() {
  return new Promise((res, rej) => {
    const srv = net.createServer();
    srv.once("error", rej);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

/** The environment of a new user: the machine's PATH (not the node this bench runs on when make put
 * it there from this checkout's .tools/), no inherited make or npm settings, an empty npm cache. */
function userEnv(cache, ports) {
  const env = { ...process.env };
  for (const k of Object.keys(env)) {
    if (/^(MAKEFLAGS|MFLAGS|MAKELEVEL|MAKEOVERRIDES)$/.test(k) || /^npm_/i.test(k)) delete env[k];
  }
  env.PATH = (env.PATH ?? "")
    .split(":")
    .filter((p) => p && !resolve(p).startsWith(join(REPO, ".tools")))
    .join(":");
  env.npm_config_cache = cache;
  env.NO_COLOR = "1";
  env.RELAYCTL_DEV_PORT = String(ports.api);
  env.RELAYCTL_DEV_GATEWAY_PORT = String(ports.gateway);
  env.RELAYCTL_DEV_PROXY_PORT = String(ports.proxy);
  env.RELAYCTL_DEV_PROXY_ADMIN_PORT = String(ports.proxyAdmin);
  return env;
}

/** Runs `make dev` in dir; resolves when dev.json appears, the process ends, or the deadline passes. */
function runMakeDev(dir, env, t0, log) {
  const child = spawn("make", ["dev"], { cwd: dir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const lines = [];
  const take = (stream) => {
    let rest = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      const at = performance.now() - t0;
      const parts = (rest + chunk).split("\n");
      rest = parts.pop() ?? "";
      for (const text of parts) {
        lines.push({ at, text });
        log.push(`${sec(at).padStart(7)}s ${text}`);
      }
    });
  };
  take(child.stdout);
  take(child.stderr);
  const devJson = join(dir, ".relayctl", "dev.json");
  const done = new Promise((res) => {
    let finished = false;
    const end = (outcome) => {
      if (finished) return;
      finished = true;
      clearInterval(poll);
      clearTimeout(deadline);
      res({ ...outcome, at: performance.now() - t0 });
    };
    // dev.json is written atomically (rename), so its existence is the ready signal.
    const poll = setInterval(() => existsSync(devJson) && end({ ready: true }), 50);
    const deadline = setTimeout(
      () => end({ ready: false, why: `no dev.json after ${sec(TIMEOUT_MS)} s` }),
      TIMEOUT_MS,
    );
    child.on("exit", (code, signal) => end({ ready: false, why: `make dev exited (${signal ?? code})` }));
  });
  return { child, lines, done, devJson };
}

/** Stops make dev's whole process group: SIGINT (dev.mjs stops its agent and Caddy), then SIGKILL. */
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((res) => child.once("exit", res));
  const signal = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {}
  };
  signal("SIGINT");
  const timer = setTimeout(() => signal("SIGKILL"), STOP_GRACE_MS);
  await exited;
  clearTimeout(timer);
}

/** One exec of the bench's own, through the API with the dev.json key; its answer must be right. */
async function ownExec(dev) {
  const started = performance.now();
  const res = await fetch(`${dev.base_url}/api/automation/v1/exec`, {
    method: "POST",
    headers: { authorization: `Bearer ${dev.automation_key}`, "content-type": "application/json" },
    body: JSON.stringify({ server_id: dev.server_id, command: "echo quickstart-ok", timeout_seconds: 30 }),
  });
  const body = await res.json().catch(() => ({}));
  const ok = res.status === 200 && body.exit_code === 0 && body.stdout === "quickstart-ok\n";
  return { ok, status: res.status, ms: performance.now() - started, body };
}

/** Phase start times from the stamped lines: the first line of each mark after the previous mark. */
function phaseTable(lines, readyMs) {
  const starts = [{ name: "clone", at: 0 }];
  let from = 0;
  for (const phase of PHASES) {
    const i = lines.findIndex((l, idx) => idx >= from && phase.line.test(l.text));
    starts.push({ name: phase.name, at: i === -1 ? null : lines[i].at });
    if (i !== -1) from = i;
  }
  // Each phase lasts until the next one that was seen (the clone's row also holds make's start).
  const next = (k) => starts.slice(k + 1).find((s) => s.at !== null)?.at ?? readyMs;
  const round = (ms) => Number((ms / 1000).toFixed(2));
  return starts.map((s, k) => ({
    phase: s.name,
    start_s: s.at === null ? null : round(s.at),
    seconds: s.at === null ? null : round(next(k) - s.at),
  }));
}

function machine() {
  const cpu = cpus();
  const node = spawnSync("node", ["--version"], {
    encoding: "utf8",
    env: { PATH: userEnv("", { api: 0, gateway: 0, proxy: 0, proxyAdmin: 0 }).PATH },
  });
  return {
    cpus: cpu.length,
    cpu_model: cpu[0]?.model ?? "",
    mem_gib: Number((totalmem() / 2 ** 30).toFixed(1)),
    machine_node: node.stdout?.trim() || "none",
    load_avg_1m_at_start: Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]),
  };
}

async function main() {
  const head = spawnSync("git", ["-C", REPO, "rev-parse", "HEAD"], { encoding: "utf8" }).stdout.trim();
  const work = mkdtempSync(join(tmpdir(), "relayctl-quickstart-"));
  const cache = join(work, "npm-cache");
  mkdirSync(cache);
  const dir = join(work, "relayctl");
  const ports = {
    api: await freePort(),
    gateway: await freePort(),
    proxy: await freePort(),
    proxyAdmin: await freePort(),
  };
  const env = userEnv(cache, ports);
  const host = machine();
  const log = [];
  say(
    `clone of ${REPO} at ${head.slice(0, 12)} into ${dir}; npm cache ${cache} (empty); machine node ${host.machine_node}`,
  );

  const t0 = performance.now();
  const clone = spawnSync("git", ["clone", "--quiet", "--no-local", REPO, dir], { encoding: "utf8" });
  const cloneMs = performance.now() - t0;
  if (clone.status !== 0) throw new Error(`git clone failed: ${clone.stderr}`);
  log.push(`${sec(cloneMs).padStart(7)}s [quickstart] cloned`);

  const run = runMakeDev(dir, env, t0, log);
  let stopped = false;
  const cleanup = async () => {
    if (!stopped) {
      stopped = true;
      await stop(run.child);
    }
  };
  process.once("SIGINT", () => cleanup().then(() => process.exit(130)));
  const outcome = await run.done;
  let exec = null;
  if (outcome.ready)
    exec = await ownExec(JSON.parse(readFileSync(run.devJson, "utf8"))).catch((e) => ({
      ok: false,
      error: e.message,
    }));
  await cleanup();
  const logFile = join(work, "make-dev.log");
  writeFileSync(logFile, `${log.join("\n")}\n`);

  const phases = phaseTable(run.lines, outcome.at);
  const totalS = outcome.ready ? Number((outcome.at / 1000).toFixed(2)) : null;
  console.log("");
  console.log("| phase | starts at (s) | seconds |");
  console.log("|---|---:|---:|");
  for (const p of phases) console.log(`| ${p.phase} | ${p.start_s ?? "-"} | ${p.seconds ?? "-"} |`);
  console.log(`| **clone to first exec** | | **${totalS ?? "-"}** |`);
  console.log("");
  if (exec)
    say(
      `the bench's own exec: ${exec.ok ? "ok" : "WRONG"} (${exec.status ?? exec.error}, ${sec(exec.ms ?? null)} s)`,
    );
  const met = totalS !== null && totalS <= GOAL_S && exec?.ok === true;
  console.log(
    `goal: <= ${GOAL_S} s from clone to first exec: ${totalS === null ? `not reached (${outcome.why})` : `${totalS} s`} -> ${met ? "met" : "NOT met"}`,
  );

  const result = {
    bench: "quickstart",
    date: new Date().toISOString(),
    commit: head,
    machine: host,
    goal_s: GOAL_S,
    total_s: totalS,
    clone_s: Number((cloneMs / 1000).toFixed(2)),
    goal_met: met,
    outcome: outcome.ready ? "first exec answered" : outcome.why,
    own_exec: exec && {
      ok: exec.ok,
      status: exec.status ?? null,
      seconds: exec.ms ? Number((exec.ms / 1000).toFixed(3)) : null,
    },
    phases,
    log_tail: log.slice(-40),
  };
  mkdirSync(dirname(RESULTS), { recursive: true });
  writeFileSync(RESULTS, `${JSON.stringify(result, null, 2)}\n`);
  say(`wrote ${RESULTS}`);
  if (KEEP) say(`kept ${work} (the clone, make-dev.log)`);
  else rmSync(work, { recursive: true, force: true });
  if (!outcome.ready || !exec?.ok) {
    if (!KEEP) for (const l of log.slice(-30)) console.log(l);
    process.exitCode = 1;
  }
}

main().catch((err) => {
  console.error(`[quickstart] ${err.stack ?? err}`);
  process.exit(1);
});

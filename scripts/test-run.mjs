#!/usr/bin/env node
// make test's ava run: one MariaDB and one nats-server for the whole run instead of one of each
// per test file (mariadb-install-db alone takes ~2 s idle, DESIGN.md Facts, and ~50 files ran
// it), handed to ava as MYSQL_URL and NATS_URL. test/harness/mariadb.ts and nats.ts use them:
// each file still creates and drops its own rc_<random> database, and the files that stop,
// restart or reconfigure a server start their own. Prints each file's time at the end, slowest
// first (measured in each worker by scripts/test-run/file-time.mjs, added to ava's
// --node-arguments here).
//
//   node scripts/test-run.mjs [ava arguments]   e.g. node scripts/test-run.mjs test/exec.test.ts
//
// Variables (each with its default):
//   MYSQL_URL                unset   use this MySQL/MariaDB server (root rights to CREATE DATABASE)
//                                    instead of starting one
//   NATS_URL                 unset   use this nats-server instead of starting one
//   RELAYCTL_TEST_TOP        25      rows of the per-file time table (0: none)
//   RELAYCTL_TEST_TIMES      unset   also write every file's time to this JSON file
//   RELAYCTL_TEST_KEEP_TMP   unset   keep the servers' temp dir (logs, data) for a post-mortem
//   NODE_COMPILE_CACHE       <tmp>/compile-cache   V8's code cache for every Node process of the
//                                    run (workers, control planes, agents, CLIs);
//                                    NODE_DISABLE_COMPILE_CACHE=1 for none
//
// Why a compile cache: a run starts some thousand Node processes that load the same built
// files, and compiling them is a good part of each start (measured idle here: loading the
// control plane's serve.js 1.15 s of CPU, 0.84 s with the cache; the agent 0.45 s, 0.34 s; the
// relayctl CLI 0.33 s, 0.25 s). Node checks each entry against the file's contents, so a file
// rebuilt during the run is compiled afresh; the cache changes no behaviour.
//
// Why sharing is safe for NATS: every subject the control plane uses carries a random id
// (relayctl.v1.agent.<server uuid>.job|presence|takeover, relayctl.v1.op.<operation uuid>.done,
// relayctl.v1.refused.<process nuid>.<operation uuid>), each file's servers and operations are
// created in its own database, and a completion nobody in a process waits for is dropped
// (control-plane/src/bus/nats-bus.ts). JetStream is not used by the programs; secrets-audit,
// which reads the store dir, owns its server.
//
// The servers are stopped and the temp dir removed when ava ends, fails, or on Ctrl-C/SIGTERM.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { stripVTControlCharacters } from "node:util";
import { ManagedProcess, installMariaDb, launchMariaDb, launchNats, onFreePort } from "@relayctl/devkit";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const TOP = Number(process.env.RELAYCTL_TEST_TOP ?? 25);

const tmp = mkdtempSync(join(tmpdir(), "relayctl-test-run-"));
const timesDir = join(tmp, "times");
mkdirSync(timesDir);
/** Servers this run started, stopped newest first. */
const servers = [];
/** The ava process, once started. */
let ava;

function removeTmp() {
  if (!process.env.RELAYCTL_TEST_KEEP_TMP) rmSync(tmp, { recursive: true, force: true });
}
// Last resort (an exception in here): devkit SIGKILLs its live processes on exit; the dir goes too.
process.on("exit", removeTmp);

/** Starts a server process: kept in `servers`, so a stop or Ctrl-C ends it too. */
const launch = (opts) => {
  const proc = new ManagedProcess(opts);
  servers.push(proc);
  return proc;
};

// Started by @relayctl/devkit, as the test harness and the benchmarks start theirs.
async function startMariaDb() {
  const dir = join(tmp, "mariadb");
  const dataDir = join(dir, "db");
  mkdirSync(dir);
  await installMariaDb({ dataDir, logDir: dir, launch });
  // mariadbd cannot pick its own port (0 means 3306): one taken in between makes it exit, and
  // onFreePort tries another.
  return onFreePort(async (port) => {
    await launchMariaDb({
      dir,
      dataDir,
      port,
      logFile: join(dir, `mariadbd-${port}.log`),
      // Two files at once, each with several clusters of up to 30 pooled connections per
      // control-plane process: the default 151 was each file's alone before.
      args: ["--max-connections=2000"],
      launch,
    });
    return `mysql://root@127.0.0.1:${port}`;
  });
}

async function startNats() {
  const dir = join(tmp, "nats");
  mkdirSync(dir);
  // -p -1 (launchNats' default): nats-server picks a free port and logs it; no race.
  const { url } = await launchNats({
    name: "nats",
    args: ["-js", "-sd", join(dir, "js")],
    logFile: join(dir, "nats.log"),
    launch,
  });
  return url;
}

async function stopServers() {
  for (const proc of servers.reverse()) await proc.stop("SIGTERM");
  servers.length = 0;
}

function runAva(env) {
  // ava is the root workspace's devDependency; its package exports no package.json to resolve.
  const avaCli = join(ROOT, "node_modules/ava/entrypoints/cli.mjs");
  const hook = join(ROOT, "scripts/test-run/file-time.mjs");
  ava = spawn(process.execPath, [avaCli, `--node-arguments=--import=${hook}`, ...process.argv.slice(2)], {
    cwd: ROOT,
    env,
    stdio: ["inherit", "pipe", "pipe"],
  });
  // ava's output goes through as it comes; its failure lines are also kept, to be repeated
  // after the time table (CI keeps only the end of a run's output).
  for (const [from, to] of [
    [ava.stdout, process.stdout],
    [ava.stderr, process.stderr],
  ]) {
    let partial = "";
    from.on("data", (chunk) => {
      to.write(chunk);
      const lines = (partial + chunk.toString("utf8")).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) keepIfFailure(line);
    });
    from.on("end", () => keepIfFailure(partial));
  }
  return new Promise((done) => ava.on("close", (code, signal) => done(code ?? (signal ? 130 : 1))));
}

/** ava's lines that name a failure (✘ titles, timeouts, uncaught errors), first 60 kept. */
const failureLines = [];
const FAILURE = /✘|Timed out|Uncaught exception|Unhandled rejection|exited with a non-zero|Error:/;
function keepIfFailure(line) {
  // ANSI colours off, so the repeat reads the same in a log file.
  const plain = stripVTControlCharacters(line);
  if (failureLines.length < 60 && FAILURE.test(plain)) failureLines.push(plain);
}

function printFailures(code, times) {
  if (code === 0) return;
  const exited = times.filter((t) => t.code).map((t) => `  ${t.file} (worker exit ${t.code})`);
  const lines = failureLines.length ? failureLines.map((l) => `  ${l.trim()}`) : ["  (none printed)"];
  if (exited.length) lines.push("workers that exited non-zero:", ...exited);
  process.stdout.write(
    `\nmake test failed (ava exit ${code}); ava's failure lines, repeated:\n${lines.join("\n")}\n`,
  );
}

// Ctrl-C (which reaches ava too, same process group), SIGTERM, SIGHUP: ava is asked to stop the
// way Ctrl-C asks it (its workers end, it reports), then main() stops the servers. Before ava
// runs, the servers are stopped here; a default handler would end this process without its
// 'exit' event, leaving mariadbd running.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (ava) {
      ava.kill("SIGINT");
      return;
    }
    void stopServers().finally(() => {
      removeTmp();
      process.exit(130);
    });
  });
}

function readTimes() {
  const times = [];
  for (const name of readdirSync(timesDir)) {
    try {
      const t = JSON.parse(readFileSync(join(timesDir, name), "utf8"));
      times.push({
        file: t.file ? relative(ROOT, t.file) : "(unknown file)",
        ms: t.ms,
        cpuMs: t.cpuMs,
        code: t.code,
      });
    } catch {
      // A worker killed while writing: its file is missing from the table.
    }
  }
  return times.sort((a, b) => b.ms - a.ms);
}

function printTimes(times, wallMs) {
  if (TOP <= 0 || times.length === 0) return;
  const total = times.reduce((s, t) => s + t.ms, 0);
  const cpu = times.reduce((s, t) => s + (t.cpuMs ?? 0), 0);
  const rows = times.slice(0, TOP);
  const width = Math.max(...rows.map((t) => t.file.length));
  const seconds = (ms) => (ms === undefined ? "-" : (ms / 1000).toFixed(1)).padStart(6);
  const lines = rows.map(
    (t) =>
      `  ${t.file.padEnd(width)}  ${seconds(t.ms)} s  ${seconds(t.cpuMs)} s CPU${t.code ? `  (exit ${t.code})` : ""}`,
  );
  process.stdout.write(
    `\nslowest test files (each file's worker process, spawn to exit, and the CPU it and its children used; ${rows.length} of ${times.length}):\n` +
      `${lines.join("\n")}\n` +
      `  all ${times.length} files: ${(total / 1000).toFixed(0)} s of worker time (${(cpu / 1000).toFixed(0)} s CPU) in ${(wallMs / 1000).toFixed(0)} s of wall time\n`,
  );
}

async function main() {
  const started = Date.now();
  const [mysqlUrl, natsUrl] = await Promise.all([
    process.env.MYSQL_URL || startMariaDb(),
    process.env.NATS_URL || startNats(),
  ]);
  const code = await runAva({
    ...process.env,
    MYSQL_URL: mysqlUrl,
    NATS_URL: natsUrl,
    RELAYCTL_TEST_TIMES_DIR: timesDir,
    NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmp, "compile-cache"),
  });
  const times = readTimes();
  printTimes(times, Date.now() - started);
  printFailures(code, times);
  if (process.env.RELAYCTL_TEST_TIMES)
    writeFileSync(process.env.RELAYCTL_TEST_TIMES, `${JSON.stringify(times, null, 2)}\n`);
  return code;
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (err) {
  process.stderr.write(`test-run: ${err instanceof Error ? err.message : String(err)}\n`);
} finally {
  await stopServers();
  removeTmp();
}
process.exit(exitCode);

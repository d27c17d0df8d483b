#!/usr/bin/env node
// make bench: throughput of POST /api/automation/v1/exec under concurrent load (autocannon), in one
// run: (a) the control plane's capacity — 100 simulated agents speaking the real gRPC protocol
// and answering every job at once (no pty) — and (b) end to end with a real agent running `true`
// in a pty, against the rate this machine spawns `sh -c true` in ptys with the same concurrency.
// The same control-plane load also runs against the floor of the same hops (lib/floor-chain.mjs:
// only what the guarantees cost), on the same nats-server and MariaDB: first each on its own
// (with CPU, database and syscalls per operation), then (section alt) the two in alternated rounds,
// whose ratios the goals read (a machine whose speed drifts weighs on both alike).
// After each part: no operation lost (every 200 is a completed row, nothing left running), one
// start and one completion audit event per operation, and the audit chain verifies.
// Starts its own nats-server and MariaDB on free loopback ports in a temp dir and removes all of
// it on exit. Writes bench/results/exec-throughput.json.
import { readFileSync } from "node:fs";
import os from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import autocannon from "autocannon";
import mysql from "mysql2/promise";
import pty from "@lydell/node-pty";
import { intEnv, log, machine, runBench, writeResults } from "./lib/bench-run.mjs";
import { cpuPerOperation, cpuSeconds } from "./lib/cpu.mjs";
import { jsonWithField, run } from "./lib/processes.mjs";
import { startFloor } from "./lib/floor-chain.mjs";
import { startRelayctl } from "./lib/relayctl-stack.mjs";
import { enrollServers, startFleet, startFleetProcess } from "./lib/sim-agent.mjs";
import { formatTable, ratio } from "./lib/stats.mjs";
import { startDelayLink } from "./lib/delay-link.mjs";
import { startMariadb, startNats } from "./lib/throwaway-servers.mjs";

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(BENCH_DIR, "..");
const RESULTS_FILE = join(BENCH_DIR, "results", "exec-throughput.json");
const BENCH = "exec-throughput";

const DURATION = intEnv(BENCH, "BENCH_DURATION", 60);
const E2E_DURATION = intEnv(BENCH, "BENCH_E2E_DURATION", 20);
const CONNECTIONS = intEnv(BENCH, "BENCH_CONNECTIONS", 64);
const E2E_CONNECTIONS = intEnv(BENCH, "BENCH_E2E_CONNECTIONS", CONNECTIONS);
const SIM_AGENTS = intEnv(BENCH, "BENCH_SIM_AGENTS", 100);
/** 1: the simulated agents share the load generator's process (as before 2026-11-25 16:00 UTC). */
const SIM_IN_PROCESS = process.env.BENCH_SIM_IN_PROCESS === "1";
const KEYS = intEnv(BENCH, "BENCH_KEYS", 1);
const FLOOR_DURATION = intEnv(BENCH, "BENCH_FLOOR_DURATION", 30);
/** Section `alt`: rounds of each load, alternated (ABBA), and the seconds of each. */
const ALT_ROUNDS = intEnv(BENCH, "BENCH_ALT_ROUNDS", 6);
const ALT_SECONDS = intEnv(BENCH, "BENCH_ALT_SECONDS", 5);
// The database a network away: every chunk to and from MariaDB delayed this much each way, for the
// control plane and the floor alike (lib/delay-link.mjs); the bench's own reads go straight.
const DB_DELAY_MS = Number(process.env.BENCH_DB_DELAY_MS ?? 0);
const SECTIONS = new Set((process.env.BENCH_SECTIONS || "sim,floor,alt,e2e").split(",").map((s) => s.trim()));
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL || "info";
/** Per-key limit of the bench's keys (requests per minute): far above what a run sends. */
const KEY_RATE_LIMIT = 100_000_000;

// Issue 34: control-plane capacity against the floor of the same hops measured in the same run
// (ratios hold on every machine kind, where issue 17's 2,000 ops/s and 50 ms did not).
const GOAL_OPS_OVER_FLOOR_MIN = 0.85;
const GOAL_P99_OVER_FLOOR_P99_MAX = 1.5;
const GOAL_E2E_OVER_PTY = 0.5;

const dist = (p) => import(pathToFileURL(join(REPO, "control-plane/dist", p)).href);

// --- load -------------------------------------------------------------------------------------

/**
 * autocannon against POST /exec for `seconds`, spreading requests over `serverIds` and `keys` in
 * turn. Every answer must be a 200 with `completed` and exit code 0; anything else is counted.
 */
async function load(baseUrl, { serverIds, keys, connections, seconds, title, latencies }) {
  let i = 0;
  const bad = { count: 0, samples: [] };
  const completed = { count: 0 };
  log(`${title}: autocannon ${connections} connections, ${seconds} s`);
  const running = autocannon({
    url: baseUrl,
    connections,
    duration: seconds,
    timeout: 30,
    requests: [
      {
        method: "POST",
        path: "/api/automation/v1/exec",
        setupRequest: (req) => {
          const n = i++;
          return {
            ...req,
            headers: {
              "content-type": "application/json",
              authorization: `Bearer ${keys[n % keys.length]}`,
            },
            body: JSON.stringify({ server_id: serverIds[n % serverIds.length], command: "true" }),
          };
        },
        onResponse: (status, body) => {
          let ok = false;
          if (status === 200) {
            try {
              const r = JSON.parse(body);
              ok = r.status === "completed" && r.exit_code === 0;
            } catch {}
          }
          if (ok) completed.count++;
          else {
            bad.count++;
            if (bad.samples.length < 5) bad.samples.push(`${status} ${String(body).slice(0, 200)}`);
          }
        },
      },
    ],
  });
  // Each answer's time (autocannon's own, the figure its histogram is made of), when asked: the
  // alternated section's percentiles are over every request of its rounds.
  if (latencies) running.on("response", (_client, _status, _bytes, ms) => latencies.push(ms));
  const result = await running;
  // Said as it happens: a run's JSON holds the samples too, but a later run overwrites it.
  if (bad.count > 0) log(`${title}: ${bad.count} answers not completed, first: ${bad.samples.join(" | ")}`);
  return {
    seconds,
    connections,
    requests: result.requests.total,
    ops_per_s: Number((completed.count / seconds).toFixed(1)),
    completed_200: completed.count,
    not_completed: bad.count,
    not_completed_samples: bad.samples,
    errors: result.errors,
    timeouts: result.timeouts,
    latency_ms: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      mean: result.latency.average,
      max: result.latency.max,
    },
  };
}

// --- checks -----------------------------------------------------------------------------------

/** MariaDB's counters of statements, round trips and log flushes (SHOW GLOBAL STATUS). */
const STATUS = [
  "Questions",
  "Com_select",
  "Com_insert",
  "Com_update",
  "Com_commit",
  "Com_begin",
  // A guessed chain head found stale is rolled back; each guessed batch runs one or two INSERT ...
  // SELECT guards (audit/group-commit.ts): how many batches took which way.
  "Com_rollback",
  "Com_insert_select",
  "Innodb_data_fsyncs",
  // Row lock waits (count, and milliseconds waited in all), per operation: how much the chain
  // head's lock (one per tenant, every audited write takes it) serializes the writers.
  "Innodb_row_lock_waits",
  "Innodb_row_lock_time",
  "Innodb_buffer_pool_reads",
];
async function dbStatus(db) {
  const [rows] = await (db.raw ? db.raw.bind(db) : db.query.bind(db))(
    `SHOW GLOBAL STATUS WHERE Variable_name IN (${STATUS.map(() => "?").join(",")})`,
    STATUS,
  );
  return Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
}

/** Per operation of the load: round trips (Questions), statements by kind, log fsyncs. */
function perOperation(before, after, ops) {
  return Object.fromEntries(
    STATUS.map((k) => [
      k.toLowerCase(),
      ops > 0 ? Math.round(((after[k] - before[k]) / ops) * 100) / 100 : null,
    ]),
  );
}

/** Operations and their audit events, read in one transaction (one snapshot). */
async function counts(db, serverIds) {
  return db.transaction((trx) => countsIn(trx, serverIds));
}

async function countsIn(db, serverIds) {
  const ops = await db("operations")
    .whereIn("server_id", serverIds)
    .select("status")
    .count({ n: "*" })
    .groupBy("status");
  const byStatus = Object.fromEntries(ops.map((r) => [r.status, Number(r.n)]));
  const events = await db("audit_events")
    .whereIn("server_id", serverIds)
    .whereIn("event_type", ["operation.exec", "operation.completed"])
    .select("event_type")
    .count({ n: "*" })
    .groupBy("event_type");
  const byType = Object.fromEntries(events.map((r) => [r.event_type, Number(r.n)]));
  return {
    operations: Object.values(byStatus).reduce((a, b) => a + b, 0),
    completed: byStatus.completed ?? 0,
    running: byStatus.running ?? 0,
    failed: (byStatus.failed ?? 0) + (byStatus.timeout ?? 0),
    start_events: byType["operation.exec"] ?? 0,
    completion_events: byType["operation.completed"] ?? 0,
  };
}

/**
 * After a load: every operation finished and no new one arriving (requests autocannon gave up on
 * at the end of its run are still served), polled up to 30 s; then the figures that prove nothing
 * was lost.
 */
async function settle(db, serverIds, run) {
  let c;
  let previous = -1;
  const deadline = performance.now() + 30_000;
  for (;;) {
    c = await counts(db, serverIds);
    if ((c.running === 0 && c.operations === previous) || performance.now() > deadline) break;
    previous = c.operations;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return {
    ...c,
    // An operation answered 200 completed but not stored completed, or stored but never answered.
    lost: Math.max(0, run.completed_200 - c.completed) + c.running,
    audit_events_match: c.start_events === c.operations && c.completion_events === c.operations,
  };
}

async function verifyAudit(env) {
  const main = join(REPO, "control-plane/dist/cli/main.js");
  const out = await run(process.execPath, [main, "admin", "audit", "verify"], { env }).catch((err) => ({
    stdout: err.stdout ?? "",
    failed: err,
  }));
  try {
    const doc = jsonWithField(out.stdout, "ok");
    return { ok: doc.ok === true, events: doc.tenants?.reduce((s, t) => s + (t.events ?? 0), 0) };
  } catch {
    return { ok: false, error: String(out.failed?.message ?? out.stdout).slice(0, 500) };
  }
}

// --- the floor (lib/floor-chain.mjs) under the same load ---------------------------------------

/**
 * The same load against the floor — the same hops with only what the guarantees cost, its agent
 * answering at once for SIM_AGENTS servers — on the same nats-server and MariaDB: what this
 * machine can do at all with these parts, against which the control plane's figures are read.
 */
async function floorCapacity(group, tmp, { nats, dbServer }) {
  const floor = await startFloor(group, tmp, {
    mysqlUrl: dbServer.url,
    natsUrl: nats.url,
    mode: "sim",
    agents: SIM_AGENTS,
    name: "floor-sim",
  });
  const target = { serverIds: floor.serverIds, keys: [floor.token], connections: CONNECTIONS };
  await load(floor.url, { ...target, seconds: 2, title: "floor warm-up" });
  const pids = {
    front: floor.pids.front,
    gateway: floor.pids.gateway,
    "agent (100 streams)": floor.pids.agent,
    mariadb: dbServer.proc.pid,
    nats: nats.proc.pid,
    "bench (autocannon)": process.pid,
  };
  // One connection for the counts before and after, and the polls between.
  const conn = await mysql.createConnection({ uri: dbServer.url });
  const count = () => floorCounts(conn, floor.database);
  try {
    const before = await count();
    const statusBefore = await dbStatus(conn);
    const cpuBefore = cpuSeconds(pids);
    const ioBefore = syscalls(pids);
    const r = await load(floor.url, { ...target, seconds: FLOOR_DURATION, title: "floor, answered at once" });
    const statusAfter = await dbStatus(conn);
    const cpuAfter = cpuSeconds(pids);
    const ioAfter = syscalls(pids);
    const { after, checks } = await floorSettle(count, before, r.completed_200);
    const ops = after.operations - before.operations;
    return {
      ...r,
      agents: SIM_AGENTS,
      checks,
      db_per_operation: perOperation(statusBefore, statusAfter, ops),
      cpu_ms_per_operation: cpuPerOperation(cpuBefore, cpuAfter, ops),
      syscalls_per_operation: syscallsPerOperation(ioBefore, ioAfter, ops),
    };
  } finally {
    await conn.end();
  }
}

// --- the two loads alternated (section alt) ----------------------------------------------------

/** p50, p99 and max of a list of milliseconds. */
function percentiles(ms) {
  const sorted = Float64Array.from(ms).sort();
  const at = (q) =>
    sorted.length
      ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] * 10) / 10
      : null;
  return { p50: at(0.5), p99: at(0.99), max: at(1) };
}

/**
 * Section `alt`: the control plane's load and the floor's in BENCH_ALT_ROUNDS rounds of
 * BENCH_ALT_SECONDS each, alternated ABBA (control plane, floor, floor, control plane, ...), both
 * up the whole time on the same nats-server and MariaDB, so that a machine whose speed drifts
 * during the run (this kind's moved 2-3 x within a day) weighs on both alike. Ops/s over all the
 * rounds of each; percentiles over every request of each; nothing lost on either.
 */
async function alternated(group, tmp, { nats, dbServer, stack, db, keys, createJoinToken }) {
  log(`alternated: enrolling ${SIM_AGENTS} more simulated agents and starting a second floor`);
  const enrolled = await enrollServers(db, createJoinToken, {
    baseUrl: stack.baseUrl,
    tenantId: stack.tenantId,
    n: SIM_AGENTS,
    prefix: "alt",
  });
  const fleet = SIM_IN_PROCESS
    ? await startFleet(stack.gatewayUrl, enrolled)
    : await startFleetProcess(stack.gatewayUrl, enrolled, tmp);
  const floor = await startFloor(group, tmp, {
    mysqlUrl: dbServer.url,
    natsUrl: nats.url,
    mode: "sim",
    agents: SIM_AGENTS,
    name: "floor-alt",
  });
  const targets = {
    sim: { url: stack.baseUrl, serverIds: enrolled.map((e) => e.serverId), keys },
    floor: { url: floor.url, serverIds: floor.serverIds, keys: [floor.token] },
  };
  const conn = await mysql.createConnection({ uri: dbServer.url });
  try {
    for (const [name, t] of Object.entries(targets))
      await load(t.url, { ...t, connections: CONNECTIONS, seconds: 2, title: `alternated warm-up, ${name}` });
    const poolBefore = await dbStatus(conn);
    const simBefore = await counts(db, targets.sim.serverIds);
    const floorBefore = await floorCounts(conn, floor.database);
    const acc = {};
    for (const name of Object.keys(targets))
      acc[name] = { completed: 0, notCompleted: 0, seconds: 0, latencies: [], rounds: [] };
    for (let round = 0; round < ALT_ROUNDS; round++) {
      for (const name of round % 2 === 0 ? ["sim", "floor"] : ["floor", "sim"]) {
        const t = targets[name];
        const a = acc[name];
        const r = await load(t.url, {
          ...t,
          connections: CONNECTIONS,
          seconds: ALT_SECONDS,
          title: `alternated round ${round + 1} of ${ALT_ROUNDS}, ${name}`,
          latencies: a.latencies,
        });
        a.completed += r.completed_200;
        a.notCompleted += r.not_completed;
        a.seconds += r.seconds;
        a.rounds.push(r.ops_per_s);
      }
    }
    // Both loads share the one MariaDB: its reads from disk through the rounds, both sides together.
    const poolReads = (await dbStatus(conn)).Innodb_buffer_pool_reads - poolBefore.Innodb_buffer_pool_reads;
    const simChecks = await settle(db, targets.sim.serverIds, {
      completed_200: acc.sim.completed + simBefore.completed,
    });
    const { checks: floorChecks } = await floorSettle(
      () => floorCounts(conn, floor.database),
      floorBefore,
      acc.floor.completed,
    );
    const summary = (a, checks) => ({
      ops_per_s: Number((a.completed / a.seconds).toFixed(1)),
      rounds_ops_per_s: a.rounds,
      requests: a.latencies.length,
      completed_200: a.completed,
      not_completed: a.notCompleted,
      latency_ms: percentiles(a.latencies),
      checks,
    });
    return {
      rounds: ALT_ROUNDS,
      seconds_per_round: ALT_SECONDS,
      connections: CONNECTIONS,
      agents: SIM_AGENTS,
      db_buffer_pool_reads: poolReads,
      sim: summary(acc.sim, simChecks),
      floor: summary(acc.floor, floorChecks),
    };
  } finally {
    fleet.stop();
    await conn.end();
  }
}

/**
 * After a load on the floor, which answers only after both commits (what was answered is stored):
 * waits up to 10 s for requests autocannon gave up on at its end, then the figures that prove
 * nothing was lost.
 */
async function floorSettle(count, before, completed200) {
  let after = await count();
  const deadline = performance.now() + 10_000;
  while (after.running > 0 && performance.now() < deadline) {
    await new Promise((res) => setTimeout(res, 200));
    after = await count();
  }
  return {
    after,
    checks: {
      ...after,
      lost: Math.max(0, completed200 - (after.completed - before.completed)) + after.running,
      audit_events_match: after.events === 2 * after.operations,
    },
  };
}

/** Each process's read and write system calls so far (/proc/<pid>/io), null where unreadable. */
function syscalls(pids) {
  return Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => {
      try {
        const io = Object.fromEntries(
          readFileSync(`/proc/${pid}/io`, "utf8")
            .trim()
            .split("\n")
            .map((l) => l.split(": ")),
        );
        return [name, { r: Number(io.syscr), w: Number(io.syscw) }];
      } catch {
        return [name, null];
      }
    }),
  );
}

/** Reads and writes per operation of each process between two syscalls() readings. */
function syscallsPerOperation(before, after, ops) {
  const out = {};
  for (const k of Object.keys(before)) {
    if (!before[k] || !after[k] || ops <= 0) continue;
    const per = (x) => Math.round(((after[k][x] - before[k][x]) / ops) * 100) / 100;
    out[k] = `${per("r")} r / ${per("w")} w`;
  }
  return out;
}

/** The floor's operations by status, and its events. */
async function floorCounts(conn, database) {
  const [[ops]] = await conn.query(
    `SELECT COUNT(*) AS n, SUM(status = 'completed') AS completed, SUM(status = 'running') AS running FROM ${database}.ops`,
  );
  const [[ev]] = await conn.query(`SELECT COUNT(*) AS n FROM ${database}.events`);
  return {
    operations: Number(ops.n),
    completed: Number(ops.completed ?? 0),
    running: Number(ops.running ?? 0),
    events: Number(ev.n),
  };
}

// --- bare pty at the same concurrency ----------------------------------------------------------

function ptyOnce() {
  return new Promise((resolve, reject) => {
    const term = pty.spawn("/bin/sh", ["-c", "true"], {
      name: "xterm-256color",
      cols: 80,
      rows: 24,
      cwd: os.tmpdir(),
      env: process.env,
    });
    term.onData(() => {});
    term.onExit(({ exitCode }) =>
      exitCode === 0 ? resolve() : reject(new Error(`sh -c true exited ${exitCode}`)),
    );
  });
}

async function ptyRate(concurrency, seconds) {
  log(`bare node-pty \`sh -c true\`: ${concurrency} at a time, ${seconds} s`);
  const end = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        await ptyOnce();
        done++;
      }
    }),
  );
  return { seconds, concurrency, spawns: done, per_s: Number((done / seconds).toFixed(1)) };
}

// --- main -------------------------------------------------------------------------------------

/** `way` → automation-key admissions counted so far by the api at `baseUrl` (its /metrics). */
async function keyAdmissions(baseUrl) {
  const text = await (await fetch(new URL("/metrics", baseUrl))).text();
  const out = {};
  for (const m of text.matchAll(/^relayctl_automation_key_admissions_total\{way="(\w+)"\} (\d+)$/gm))
    out[m[1]] = Number(m[2]);
  return out;
}

async function main() {
  const results = {};
  await runBench(BENCH, async (group, tmp) => {
    log("starting nats-server and MariaDB");
    const [nats, direct] = await Promise.all([startNats(group, tmp), startMariadb(group, tmp)]);
    // `dbServer.url`: what the control plane and the floor use; `direct`: the bench's own reads.
    const link = DB_DELAY_MS > 0 ? await startDelayLink(group, direct.url, DB_DELAY_MS) : undefined;
    if (link) log(`MariaDB ${DB_DELAY_MS} ms away each way (a delaying link, pid ${link.pid})`);
    const dbServer = { ...direct, url: link?.url ?? direct.url };
    const stack = await startRelayctl(group, tmp, {
      natsUrl: nats.url,
      databaseUrl: dbServer.url,
      keyCount: 0,
      logLevel: LOG_LEVEL,
    });
    log(`api ${stack.baseUrl}, gateway ${stack.gatewayUrl}, real agent ${stack.serverId}`);
    const { openDb } = await dist("db/knex.js");
    const { createJoinToken } = await dist("cli/admin.js");
    const { newAutomationKeyRow } = await dist("auth/automation-key.js");
    const db = openDb(direct.url);
    const env = {
      ...process.env,
      RELAYCTL_DATABASE_URL: dbServer.url,
      RELAYCTL_AUDIT_HMAC_KEY:
        process.env.RELAYCTL_AUDIT_HMAC_KEY ?? "cmVsYXljdGwtYmVuY2gtYXVkaXQta2V5LTMyYnl0ZXM=",
    };
    const keys = [];
    for (let k = 0; k < KEYS; k++) {
      const { key, row } = newAutomationKeyRow(stack.tenantId, `bench-throughput-${k}`, {
        rate_limit: KEY_RATE_LIMIT,
      });
      await db("automation_keys").insert(row);
      keys.push(key);
    }
    try {
      if (SECTIONS.has("sim")) {
        log(`enrolling ${SIM_AGENTS} simulated agents`);
        const enrolled = await enrollServers(db, createJoinToken, {
          baseUrl: stack.baseUrl,
          tenantId: stack.tenantId,
          n: SIM_AGENTS,
        });
        const fleet = SIM_IN_PROCESS
          ? await startFleet(stack.gatewayUrl, enrolled)
          : await startFleetProcess(stack.gatewayUrl, enrolled, tmp);
        const serverIds = enrolled.map((e) => e.serverId);
        try {
          // A short untimed warm-up (connections, JIT, pools).
          await load(stack.baseUrl, {
            serverIds,
            keys,
            connections: CONNECTIONS,
            seconds: 2,
            title: "warm-up",
          });
          const before = await counts(db, serverIds);
          const statusBefore = await dbStatus(db);
          const pids = {
            api: stack.procs.api.pid,
            gateway: stack.procs.gateway.pid,
            mariadb: dbServer.proc.pid,
            nats: nats.proc.pid,
            ...(SIM_IN_PROCESS
              ? { "bench (autocannon, simulated agents)": process.pid }
              : { "simulated agents (100 streams)": fleet.pid, "bench (autocannon)": process.pid }),
          };
          const cpuBefore = cpuSeconds(pids);
          const ioBefore = syscalls(pids);
          const admissionsBefore = await keyAdmissions(stack.baseUrl);
          const r = await load(stack.baseUrl, {
            serverIds,
            keys,
            connections: CONNECTIONS,
            seconds: DURATION,
            title: `control plane, ${SIM_AGENTS} simulated agents`,
          });
          const statusAfter = await dbStatus(db);
          const cpuAfter = cpuSeconds(pids);
          const ioAfter = syscalls(pids);
          const admissionsAfter = await keyAdmissions(stack.baseUrl);
          const after = await settle(db, serverIds, {
            completed_200: r.completed_200 + before.completed,
          });
          results.sim = {
            ...r,
            agents: SIM_AGENTS,
            keys: KEYS,
            checks: after,
            db_per_operation: perOperation(statusBefore, statusAfter, after.operations - before.operations),
            cpu_ms_per_operation: cpuPerOperation(cpuBefore, cpuAfter, after.operations - before.operations),
            syscalls_per_operation: syscallsPerOperation(
              ioBefore,
              ioAfter,
              after.operations - before.operations,
            ),
            agent_counters: { ...(fleet.fresh ? await fleet.fresh() : fleet.counters) },
            // How the api admitted the requests (relayctl_automation_key_admissions_total): on the
            // key's row, their counts committed with their starts, or the full way.
            key_admissions: Object.fromEntries(
              Object.entries(admissionsAfter).map(([way, n]) => [way, n - (admissionsBefore[way] ?? 0)]),
            ),
          };
        } finally {
          fleet.stop();
        }
      }
      if (SECTIONS.has("floor")) results.floor = await floorCapacity(group, tmp, { nats, dbServer });
      if (SECTIONS.has("alt"))
        results.alt = await alternated(group, tmp, { nats, dbServer, stack, db, keys, createJoinToken });
      if (SECTIONS.has("e2e")) {
        results.pty = await ptyRate(E2E_CONNECTIONS, E2E_DURATION);
        const serverIds = [stack.serverId];
        await load(stack.baseUrl, {
          serverIds,
          keys,
          connections: E2E_CONNECTIONS,
          seconds: 2,
          title: "warm-up",
        });
        const before = await counts(db, serverIds);
        const r = await load(stack.baseUrl, {
          serverIds,
          keys,
          connections: E2E_CONNECTIONS,
          seconds: E2E_DURATION,
          title: "end to end, one real agent",
        });
        const after = await settle(db, serverIds, { completed_200: r.completed_200 + before.completed });
        results.e2e = { ...r, keys: KEYS, checks: after };
      }
      results.audit_verify = await verifyAudit(env);
    } finally {
      await db.destroy();
    }
  });
  const doc = report(results);
  await writeResults(RESULTS_FILE, doc);
  if (process.env.BENCH_STRICT === "1" && !doc.goals_met) process.exit(3);
}

function report(results) {
  const rows = [["measure", "ops/s", "p50 ms", "p99 ms", "lost", "audit = ops"]];
  if (results.sim) {
    const s = results.sim;
    rows.push([
      `POST /exec, ${s.agents} simulated agents, ${s.connections} clients`,
      s.ops_per_s,
      s.latency_ms.p50,
      s.latency_ms.p99,
      s.checks.lost,
      s.checks.audit_events_match,
    ]);
  }
  if (results.floor) {
    const f = results.floor;
    rows.push([
      `floor: the same hops, guarantees only, ${f.agents} agents, ${f.connections} clients`,
      f.ops_per_s,
      f.latency_ms.p50,
      f.latency_ms.p99,
      f.checks.lost,
      f.checks.audit_events_match,
    ]);
  }
  if (results.e2e) {
    const e = results.e2e;
    rows.push([
      `POST /exec, one real agent, ${e.connections} clients`,
      e.ops_per_s,
      e.latency_ms.p50,
      e.latency_ms.p99,
      e.checks.lost,
      e.checks.audit_events_match,
    ]);
  }
  if (results.alt) {
    const a = results.alt;
    for (const [who, x] of [
      [`alternated: POST /exec, ${a.agents} simulated agents, ${a.connections} clients`, a.sim],
      [`alternated: the floor, ${a.agents} agents, ${a.connections} clients`, a.floor],
    ])
      rows.push([
        who,
        x.ops_per_s,
        x.latency_ms.p50,
        x.latency_ms.p99,
        x.checks.lost,
        x.checks.audit_events_match,
      ]);
  }
  if (results.pty)
    rows.push([
      `bare node-pty sh -c true, ${results.pty.concurrency} at a time`,
      results.pty.per_s,
      "-",
      "-",
      "-",
      "-",
    ]);
  console.log(`\n${formatTable(rows)}\n`);
  if (results.sim?.db_per_operation)
    console.log(
      `database per operation (control plane): ${JSON.stringify(results.sim.db_per_operation)}\n` +
        `CPU ms per operation (control plane): ${JSON.stringify(results.sim.cpu_ms_per_operation)}\n` +
        `read/write syscalls per operation (control plane; a count: steadier than CPU on a loaded machine, though it falls as batches grow with throughput): ${JSON.stringify(results.sim.syscalls_per_operation)}\n`,
    );
  if (results.floor?.cpu_ms_per_operation)
    console.log(
      `database per operation (floor): ${JSON.stringify(results.floor.db_per_operation)}\n` +
        `CPU ms per operation (floor): ${JSON.stringify(results.floor.cpu_ms_per_operation)}\n` +
        `read/write syscalls per operation (floor): ${JSON.stringify(results.floor.syscalls_per_operation)}\n`,
    );
  const e2eOverPty = ratio(results.e2e?.ops_per_s, results.pty?.per_s);
  const sequential = {
    ops: ratio(results.sim?.ops_per_s, results.floor?.ops_per_s),
    p99: ratio(results.sim?.latency_ms.p99, results.floor?.latency_ms.p99),
  };
  if (sequential.ops != null) console.log(`control plane ops/s / floor ops/s: ${sequential.ops}\n`);
  const alt = results.alt;
  const alternatedRatios = alt && {
    ops: ratio(alt.sim.ops_per_s, alt.floor.ops_per_s),
    p99: ratio(alt.sim.latency_ms.p99, alt.floor.latency_ms.p99),
  };
  if (alt)
    console.log(
      `alternated, ${alt.rounds} rounds of ${alt.seconds_per_round} s each (ABBA), ops/s by round: control plane ${alt.sim.rounds_ops_per_s.join(", ")}; floor ${alt.floor.rounds_ops_per_s.join(", ")}\n` +
        `alternated control plane / floor: ops/s ${alternatedRatios.ops}, p99 ${alternatedRatios.p99}\n` +
        `MariaDB's reads from disk through the alternated rounds (both loads): ${alt.db_buffer_pool_reads}\n`,
    );
  // The goals read the alternated ratios when that section ran (a drifting machine weighs on both
  // alike there), else the sequential ones.
  const simOverFloor = alternatedRatios ? alternatedRatios.ops : sequential.ops;
  const p99OverFloor = alternatedRatios ? alternatedRatios.p99 : sequential.p99;
  const clean = (x) => x && x.checks.lost === 0 && x.checks.audit_events_match && x.not_completed === 0;
  const goals = [
    {
      name: `capacity >= ${GOAL_OPS_OVER_FLOOR_MIN} x floor ops/s${alternatedRatios ? " (alternated)" : ""}`,
      value: simOverFloor,
      limit: GOAL_OPS_OVER_FLOOR_MIN,
      met: simOverFloor == null ? null : simOverFloor >= GOAL_OPS_OVER_FLOOR_MIN,
    },
    {
      name: `p99 <= ${GOAL_P99_OVER_FLOOR_P99_MAX} x floor p99${alternatedRatios ? " (alternated)" : ""}`,
      value: p99OverFloor,
      limit: GOAL_P99_OVER_FLOOR_P99_MAX,
      met: p99OverFloor == null ? null : p99OverFloor <= GOAL_P99_OVER_FLOOR_P99_MAX,
    },
    {
      name: "0 lost, every answer completed, audit events = operations (start and completion)",
      value: null,
      met:
        results.sim || results.e2e || alt
          ? [results.sim, results.e2e, alt?.sim, alt?.floor].filter(Boolean).every(clean)
          : null,
    },
    { name: "audit chain verifies", value: null, met: results.audit_verify ? results.audit_verify.ok : null },
    {
      name: `end to end ops/s >= ${GOAL_E2E_OVER_PTY} x bare pty spawns/s`,
      value: e2eOverPty,
      limit: GOAL_E2E_OVER_PTY,
      met: e2eOverPty == null ? null : e2eOverPty >= GOAL_E2E_OVER_PTY,
    },
  ];
  for (const g of goals) {
    const verdict = g.met == null ? "not measured" : g.met ? "MET" : "NOT MET";
    console.log(`goal: ${g.name}: ${g.value ?? "-"} → ${verdict}`);
  }
  const measured = goals.filter((g) => g.met != null);
  return {
    bench: BENCH,
    ...machine(),
    config: {
      duration_s: DURATION,
      e2e_duration_s: E2E_DURATION,
      floor_duration_s: FLOOR_DURATION,
      alt_rounds: ALT_ROUNDS,
      alt_seconds_per_round: ALT_SECONDS,
      connections: CONNECTIONS,
      e2e_connections: E2E_CONNECTIONS,
      sim_agents: SIM_AGENTS,
      sim_agents_in_own_process: !SIM_IN_PROCESS,
      keys: KEYS,
      sections: [...SECTIONS],
      log_level: LOG_LEVEL,
      db_delay_ms_each_way: DB_DELAY_MS,
      db_buffer_pool: process.env.BENCH_MARIADB_BUFFER_POOL || "2G",
    },
    results,
    ratios: {
      e2e_ops_over_pty_spawns: e2eOverPty,
      control_plane_ops_over_floor_ops: sequential.ops,
      control_plane_p99_over_floor_p99: sequential.p99,
      alternated_ops_over_floor_ops: alternatedRatios?.ops ?? null,
      alternated_p99_over_floor_p99: alternatedRatios?.p99 ?? null,
    },
    goals,
    goals_met: measured.length === goals.length && measured.every((g) => g.met),
  };
}

await main();

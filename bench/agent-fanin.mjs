#!/usr/bin/env node
// make bench: how many agents one gateway process holds. 10,000 simulated agents (each its own
// gRPC connection and credential, speaking the real protocol, heartbeating at the interval the
// gateway gives: 5 s by default) connect to ONE gateway; the gateway's RSS and its CPU while they
// only heartbeat are measured. Then the gateway is killed (SIGKILL) and started again on the same
// address while execs keep being sent: time until every agent is back (the real agent's reconnect
// schedule, agent/src/connection/backoff.ts), the parts of it (the gateway's own start, the
// handshakes per second it then takes, its CPU and peak RSS through the storm), and no operation lost (each one ends completed, or failed with its reason; none stays
// running, every 200 is stored completed). Starts its own nats-server and MariaDB; removes it all.
// Writes bench/results/agent-fanin.json.
import { fork } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { setPriority } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { intEnv, log, machine, runBench, writeResults } from "./lib/bench-run.mjs";
import { freePort } from "./lib/processes.mjs";
import { startGateway, startRelayctl } from "./lib/relayctl-stack.mjs";
import { waitFor } from "./lib/sim-agent.mjs";
import { formatTable } from "./lib/stats.mjs";
import { startMariadb, startNats } from "./lib/throwaway-servers.mjs";

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(BENCH_DIR, "..");
const RESULTS_FILE = join(BENCH_DIR, "results", "agent-fanin.json");
const BENCH = "agent-fanin";

const AGENTS = intEnv(BENCH, "BENCH_AGENTS", 10_000);
const WORKERS = intEnv(BENCH, "BENCH_WORKERS", 4);
const STEADY_SECONDS = intEnv(BENCH, "BENCH_STEADY_SECONDS", 30);
const CONNECT_TIMEOUT_S = intEnv(BENCH, "BENCH_CONNECT_TIMEOUT", 300);
// Issue 34, goal 5: all back within 15 s of the SIGKILL, 0 lost, RSS still under 512 MiB.
const RECONNECT_GOAL_S = 15;
const RSS_GOAL_BYTES = 512 * 1024 ** 2;
const CPU_GOAL = 0.1;
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL || "info";
// The simulated fleet stands in for 10,000 machines of their own; here it shares this machine's
// cores with the gateway (1.2-1.4 cores of two through a storm on a slower machine). Its workers
// can run at a nice value (BENCH_SIM_NICE, 0-19), so the gateway (and MariaDB, NATS, the api) get
// a core whenever they have work, as beside real agents. 0 (equal shares) by default.
const SIM_NICE = intEnv(BENCH, "BENCH_SIM_NICE", 0, { min: 0, max: 19 });
// How a simulated agent dials: "grpc-js" (the agent's own client; its CPU limits how fast the
// fleet comes back on a slow machine) or "h2" (bench/lib/sim-h2-call.mjs: the same stream and
// channel options over node:http2 alone, ~half the fleet's CPU: the whole fleet at once, as
// real agents on their own machines come).
const SIM_CLIENT = process.env.BENCH_SIM_CLIENT || "grpc-js";
// Execs a second to random agents from 2 s before the SIGKILL until 3 s after all are back (about
// what 8 closed loops sent through a storm on the fast-fork machine: 1,043 in ~18 s).
const EXEC_RATE = intEnv(BENCH, "BENCH_EXEC_RATE", 50);
/** How often, at most, the gateway's /metrics is asked through the storm (see the sampler). */
const METRICS_EVERY_MS = 5000;
const MAX_EXECS_IN_FLIGHT = 256;

/** The metrics address a gateway process logged at its start. */
const metricsUrlOf = async (proc) =>
  (await proc.waitForMsg("gateway metrics listening", { timeoutMs: 60_000 })).url;

/**
 * How long the gateway takes to answer /metrics with all its agents held and only heartbeats
 * flowing, asked `n` times one after the other (ms, median and highest): what a Prometheus scrape
 * costs it, its event loop held for most of it.
 */
async function scrapeTimes(metricsUrl, n) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await (await fetch(new URL("/metrics", metricsUrl))).text();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return { p50: Number(times[n >> 1].toFixed(1)), max: Number(times[n - 1].toFixed(1)) };
}

/**
 * Where the gateway's RSS is (its /metrics: prom-client's gauges of V8's heap): V8's heap as
 * committed, of which the young generation, and the rest (native: nghttp2's sessions, sockets,
 * the binary's pages). MiB.
 */
async function memoryOf(metricsUrl) {
  const text = await (await fetch(new URL("/metrics", metricsUrl))).text();
  const gauge = (name) =>
    Number(
      text
        .split("\n")
        .find((l) => l.startsWith(`relayctl_${name} `))
        ?.split(" ")[1],
    );
  const mib = (bytes) => Number((bytes / 1024 ** 2).toFixed(0));
  const rss = gauge("process_resident_memory_bytes");
  const heap = gauge("nodejs_heap_size_total_bytes");
  return {
    rss_mib: mib(rss),
    v8_heap_mib: mib(heap),
    v8_heap_used_mib: mib(gauge("nodejs_heap_size_used_bytes")),
    v8_young_generation_mib: mib(gauge('nodejs_heap_space_size_total_bytes{space="new"}')),
    outside_v8_heap_mib: mib(rss - heap),
  };
}

const dist = (p) => import(pathToFileURL(join(REPO, "control-plane/dist", p)).href);
const CLK_TCK = 100;

function procStat(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) * 1024;
  return { cpuSeconds: (Number(f[11]) + Number(f[12])) / CLK_TCK, rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** MariaDB's statement counters (SHOW GLOBAL STATUS), to take the difference over a phase. */
async function dbCounters(db) {
  const [rows] = await db.raw(
    "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_select', 'Com_update', 'Com_insert', 'Com_commit')",
  );
  return Object.fromEntries(rows.map((r) => [r.Variable_name.toLowerCase(), Number(r.Value)]));
}

/** Statements per agent between two dbCounters() readings (the bench's own reads included). */
function perAgent(a, b, n) {
  return Object.fromEntries(Object.keys(a).map((k) => [k, Number(((b[k] - a[k]) / n).toFixed(2))]));
}

/** Servers with agent credentials, written the way enrollment writes them (hash only). */
async function insertServers(db, secrets, tenantId, n) {
  const out = [];
  const rows = [];
  for (let i = 0; i < n; i++) {
    const credential = secrets.mintToken("rag_");
    const id = crypto.randomUUID();
    rows.push({
      id,
      tenant_id: tenantId,
      name: `fanin-${i}`,
      agent_credential_hash: secrets.sha256Hex(credential),
      created_at: Date.now(),
    });
    out.push({ serverId: id, credential });
  }
  for (let i = 0; i < rows.length; i += 500) await db("servers").insert(rows.slice(i, i + 500));
  return out;
}

class Fleet {
  constructor(enrolled, address, tmp) {
    this.state = [];
    this.workers = [];
    const per = Math.ceil(enrolled.length / WORKERS);
    for (let w = 0; w < WORKERS; w++) {
      const file = join(tmp, `fanin-${w}.json`);
      writeFileSync(file, JSON.stringify(enrolled.slice(w * per, (w + 1) * per)));
      // BENCH_CPU_PROF: the simulated fleet's workers write their profiles there too.
      const prof = process.env.BENCH_CPU_PROF;
      const execArgv = prof
        ? ["--cpu-prof", `--cpu-prof-dir=${prof}`, `--cpu-prof-name=sim-agents-${w}.cpuprofile`]
        : [];
      const child = fork(join(BENCH_DIR, "lib/sim-agent-worker.mjs"), [file, address], {
        stdio: "inherit",
        execArgv,
        env: { ...process.env, BENCH_SIM_CLIENT: SIM_CLIENT },
      });
      if (SIM_NICE !== 0) setPriority(child.pid, SIM_NICE);
      this.state[w] = { connected: 0, counters: {}, rss: 0 };
      child.on("message", (m) => {
        this.state[w] = m;
      });
      this.workers.push(child);
    }
  }
  /** The workers' CPU seconds so far (user + system). */
  get cpuSeconds() {
    return this.workers.reduce((sum, w) => sum + (w.exitCode === null ? procStat(w.pid).cpuSeconds : 0), 0);
  }
  get connected() {
    return this.state.reduce((s, x) => s + x.connected, 0);
  }
  sum(name) {
    return this.state.reduce((s, x) => s + (x.counters[name] ?? 0), 0);
  }
  stop() {
    for (const w of this.workers) {
      if (w.connected) w.send("stop");
    }
  }
}

/**
 * Execs to random agents at `perSecond`, each sent on time whatever the answers' latency (at most
 * MAX_EXECS_IN_FLIGHT at once; one due beyond that is counted `skipped`); every answer kept. A
 * fixed rate, not closed loops: loops send more the faster the machine answers, and a storm then
 * carries more exec work on a faster run (3 × the statements per reconnect in one measured case).
 */
function execLoad(baseUrl, key, serverIds, perSecond) {
  const answers = { completed: 0, not_connected: 0, other: 0, skipped: 0, samples: [] };
  const inFlight = new Set();
  const one = async () => {
    const serverId = serverIds[Math.floor(Math.random() * serverIds.length)];
    try {
      const res = await fetch(`${baseUrl}/api/automation/v1/exec`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ server_id: serverId, command: "true", timeout_seconds: 60 }),
      });
      const body = await res.json().catch(() => ({}));
      if (res.status === 200 && body.status === "completed") answers.completed++;
      else if (res.status === 409) answers.not_connected++;
      else {
        answers.other++;
        if (answers.samples.length < 5)
          answers.samples.push(`${res.status} ${JSON.stringify(body).slice(0, 200)}`);
      }
    } catch (err) {
      answers.other++;
      if (answers.samples.length < 5) answers.samples.push(String(err.message));
    }
  };
  const timer = setInterval(() => {
    if (inFlight.size >= MAX_EXECS_IN_FLIGHT) {
      answers.skipped++;
      return;
    }
    const p = one().finally(() => inFlight.delete(p));
    inFlight.add(p);
  }, 1000 / perSecond);
  return {
    answers,
    stop: async () => {
      clearInterval(timer);
      await Promise.all(inFlight);
    },
  };
}

async function main() {
  const results = {};
  await runBench(BENCH, async (group, tmp) => {
    log("starting nats-server and MariaDB");
    const [nats, dbServer] = await Promise.all([startNats(group, tmp), startMariadb(group, tmp)]);
    const listen = `127.0.0.1:${await freePort()}`;
    const stack = await startRelayctl(group, tmp, {
      natsUrl: nats.url,
      databaseUrl: dbServer.url,
      keyCount: 0,
      logLevel: LOG_LEVEL,
      gatewayListen: listen,
    });
    const { openDb } = await dist("db/knex.js");
    const secrets = await dist("lib/secrets.js");
    const { newAutomationKeyRow } = await dist("auth/automation-key.js");
    const db = openDb(dbServer.url);
    let fleet;
    try {
      const { key, row } = newAutomationKeyRow(stack.tenantId, "bench-fanin", { rate_limit: 100_000_000 });
      await db("automation_keys").insert(row);
      log(`writing ${AGENTS} servers with agent credentials`);
      const enrolled = await insertServers(db, secrets, stack.tenantId, AGENTS);
      const serverIds = enrolled.map((e) => e.serverId);

      // Asked now: the line may have left the process's kept log by the steady state.
      const metricsUrl = await metricsUrlOf(stack.procs.gateway);
      log(`starting ${AGENTS} simulated agents in ${WORKERS} processes against ${listen}`);
      const t0 = performance.now();
      const g0 = procStat(stack.procs.gateway.pid).cpuSeconds;
      const q0 = await dbCounters(db);
      fleet = new Fleet(enrolled, listen, tmp);
      await waitFor(() => fleet.connected >= AGENTS, CONNECT_TIMEOUT_S * 1000, `${AGENTS} agents connected`);
      results.initial_connect_s = Number(((performance.now() - t0) / 1000).toFixed(1));
      results.initial_connect_gateway_cpu_s = Number(
        (procStat(stack.procs.gateway.pid).cpuSeconds - g0).toFixed(2),
      );
      results.initial_connect_db_per_agent = perAgent(q0, await dbCounters(db), AGENTS);
      log(
        `all ${AGENTS} connected in ${results.initial_connect_s} s (the gateway's CPU meanwhile ${results.initial_connect_gateway_cpu_s} s)`,
      );

      // Steady state: only heartbeats (every 5 s per agent) — and the gateway's own timers.
      let gatewayPid = stack.procs.gateway.pid;
      const hb0 = fleet.sum("heartbeats");
      const s0 = procStat(gatewayPid);
      const w0 = performance.now();
      log(`steady state: ${STEADY_SECONDS} s of heartbeats`);
      // Its RSS every second too: V8's old generation grows with garbage until a full collection.
      let steadyMaxRss = 0;
      const steadySampler = setInterval(() => {
        steadyMaxRss = Math.max(steadyMaxRss, procStat(gatewayPid).rss);
      }, 1000);
      await new Promise((r) => setTimeout(r, STEADY_SECONDS * 1000));
      clearInterval(steadySampler);
      const s1 = procStat(gatewayPid);
      const wall = (performance.now() - w0) / 1000;
      results.steady = {
        seconds: Number(wall.toFixed(1)),
        heartbeats: fleet.sum("heartbeats") - hb0,
        heartbeats_per_s: Number(((fleet.sum("heartbeats") - hb0) / wall).toFixed(0)),
        gateway_cpu_fraction_of_core: Number(((s1.cpuSeconds - s0.cpuSeconds) / wall).toFixed(3)),
        gateway_rss_mib: Number((s1.rss / 1024 ** 2).toFixed(0)),
        gateway_rss_max_mib: Number((Math.max(steadyMaxRss, s1.rss) / 1024 ** 2).toFixed(0)),
        gateway_peak_rss_mib: Number((s1.hwm / 1024 ** 2).toFixed(0)),
        connected: fleet.connected,
        gateway_memory: await memoryOf(metricsUrl),
        metrics_answer_ms: await scrapeTimes(metricsUrl, 5),
      };
      log(`steady: ${JSON.stringify(results.steady)}`);

      // Kill and restart, with execs flowing.
      const before = await db("operations").count({ n: "*" }).first();
      const load = execLoad(stack.baseUrl, key, serverIds, EXEC_RATE);
      await new Promise((r) => setTimeout(r, 2000));
      log("SIGKILL to the gateway; starting it again on the same address");
      const connects0 = fleet.sum("connects");
      const failed0 = fleet.sum("failedDials");
      const refused0 = fleet.sum("refusedProbes");
      await stack.procs.gateway.stop("SIGKILL");
      const tKill = performance.now();
      // Started again as its systemd unit does (deploy/systemd/relayctl-server@.service: RestartSec=2).
      await new Promise((r) => setTimeout(r, 2000));
      const tSpawn = performance.now();
      const restarted = await startGateway(group, stack.env, {
        listen,
        name: "gateway-restarted",
      });
      gatewayPid = restarted.proc.pid;
      const tUp = performance.now();
      const restartedMetrics = metricsUrlOf(restarted.proc);
      restartedMetrics.catch(() => {}); // awaited at the end (a failure is reported there)
      const c0 = procStat(gatewayPid);
      const f0 = fleet.cpuSeconds;
      const q1 = await dbCounters(db);
      // The storm's shape: how many are back at each 250 ms after the gateway listens.
      const curve = [];
      let peakRss = 0;
      // Where the RSS is near its peak: the gateway's /metrics, asked at most every
      // METRICS_EVERY_MS while the RSS grows, the highest kept. At 10,000 agents an answer cost
      // the gateway ~20 ms before process-metrics.ts (~10 after): asked once a second it was ~7 %
      // of the gateway's CPU through a storm (its profile), where a Prometheus scrapes every 15-60 s.
      let peakMemory;
      let asking = false;
      let askedAt = 0;
      let metricsAnswerMs = 0;
      const sampler = setInterval(() => {
        curve.push(fleet.connected);
        const rss = procStat(gatewayPid).rss;
        if (rss > peakRss && !asking && performance.now() - askedAt >= METRICS_EVERY_MS) {
          asking = true;
          askedAt = performance.now();
          restartedMetrics
            .then(memoryOf)
            .then((m) => {
              metricsAnswerMs = Math.max(metricsAnswerMs, performance.now() - askedAt);
              if (!peakMemory || m.rss_mib >= peakMemory.rss_mib) peakMemory = m;
            })
            .catch(() => {})
            .finally(() => {
              asking = false;
            });
        }
        peakRss = Math.max(peakRss, rss);
      }, 250);
      try {
        await waitFor(() => fleet.connected >= AGENTS, 300_000, `${AGENTS} agents reconnected`);
      } finally {
        clearInterval(sampler);
      }
      const tAll = performance.now();
      const c1 = procStat(gatewayPid);
      const f1 = fleet.cpuSeconds;
      const q2 = await dbCounters(db);
      const storm = {
        gateway_cpu_s: Number((c1.cpuSeconds - c0.cpuSeconds).toFixed(2)),
        gateway_cpu_fraction_of_core: Number(
          ((c1.cpuSeconds - c0.cpuSeconds) / ((tAll - tUp) / 1000)).toFixed(2),
        ),
        gateway_peak_rss_mib: Number((Math.max(peakRss, c1.rss) / 1024 ** 2).toFixed(0)),
        // The simulated agents' own CPU meanwhile: remote machines' work, done on this one.
        sim_agents_cpu_s: Number((f1 - f0).toFixed(2)),
        // MariaDB statements per reconnect (the exec load's and the bench's own included).
        db_per_agent: perAgent(q1, q2, AGENTS),
        gateway_memory_near_peak: peakMemory,
        // The slowest of those /metrics answers (ms), mostly its wait behind the storm's work; what a
        // scrape itself costs is the steady state's metrics_answer_ms.
        metrics_answer_ms_max: Math.round(metricsAnswerMs),
        connected_every_250ms: curve,
        // The fastest second of the storm: the handshakes the gateway took in its busiest 4 samples.
        peak_handshakes_per_s: Math.max(0, ...curve.slice(4).map((n, i) => n - curve[i])),
      };
      await new Promise((r) => setTimeout(r, 3000));
      await load.stop();
      // Settle: every operation of the run ends (a job lost with the gateway ends at its lease).
      let byStatus = {};
      const deadline = performance.now() + 90_000;
      for (;;) {
        const rows = await db("operations").select("status").count({ n: "*" }).groupBy("status");
        byStatus = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
        if (!byStatus.running || performance.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      const s2 = procStat(gatewayPid);
      results.restart = {
        reconnect_all_s_from_kill: Number(((tAll - tKill) / 1000).toFixed(1)),
        reconnect_all_s_from_gateway_up: Number(((tAll - tUp) / 1000).toFixed(1)),
        gateway_start_s: Number(((tUp - tKill) / 1000).toFixed(1)),
        // Of which: systemd's RestartSec (2 s), then the process's own start, from its spawn
        // until it listens.
        gateway_spawn_to_listening_s: Number(((tUp - tSpawn) / 1000).toFixed(2)),
        storm,
        reconnects: fleet.sum("connects") - connects0,
        // Attempts that cost the gateway a handshake and ended before a Welcome (lost work), and
        // connects refused while it was down.
        dials_failed: fleet.sum("failedDials") - failed0,
        probes_refused: fleet.sum("refusedProbes") - refused0,
        gateway_rss_mib_after: Number((s2.rss / 1024 ** 2).toFixed(0)),
        gateway_memory_after: await memoryOf(await restartedMetrics),
        exec_answers: load.answers,
        operations: Number((await db("operations").count({ n: "*" }).first()).n) - Number(before.n),
        operations_by_status: byStatus,
        lost: (byStatus.running ?? 0) + Math.max(0, load.answers.completed - (byStatus.completed ?? 0)),
      };
      log(`restart: ${JSON.stringify(results.restart)}`);
      results.sim_worker_rss_mib = fleet.state.map((s) => Math.round(s.rss / 1024 ** 2));
    } finally {
      fleet?.stop();
      await db.destroy();
    }
  });
  const doc = report(results);
  await writeResults(RESULTS_FILE, doc);
  if (process.env.BENCH_STRICT === "1" && !doc.goals_met) process.exit(3);
}

function report(results) {
  const s = results.steady;
  const r = results.restart;
  const rows = [
    ["measure", "value"],
    ["agents", AGENTS],
    ["initial connect of all (s)", results.initial_connect_s ?? "-"],
    ["gateway RSS, steady (MiB)", s?.gateway_rss_mib ?? "-"],
    ["  its highest through the steady state (MiB)", s?.gateway_rss_max_mib ?? "-"],
    [
      "of which V8's heap (its young generation) / outside it (MiB)",
      s?.gateway_memory
        ? `${s.gateway_memory.v8_heap_mib} (${s.gateway_memory.v8_young_generation_mib}) / ${s.gateway_memory.outside_v8_heap_mib}`
        : "-",
    ],
    ["gateway CPU while heartbeating (fraction of a core)", s?.gateway_cpu_fraction_of_core ?? "-"],
    ["heartbeats per second", s?.heartbeats_per_s ?? "-"],
    [
      "a /metrics answer, steady (ms, median / highest of 5)",
      s?.metrics_answer_ms ? `${s.metrics_answer_ms.p50} / ${s.metrics_answer_ms.max}` : "-",
    ],
    ["all reconnected after SIGKILL (s, from kill)", r?.reconnect_all_s_from_kill ?? "-"],
    ["  of which until the gateway listens again (RestartSec 2 s + its start)", r?.gateway_start_s ?? "-"],
    ["  of which its spawn until it listens (s)", r?.gateway_spawn_to_listening_s ?? "-"],
    [
      "gateway CPU through the storm (s; fraction of a core)",
      r ? `${r.storm.gateway_cpu_s}; ${r.storm.gateway_cpu_fraction_of_core}` : "-",
    ],
    [
      "the simulated agents' CPU meanwhile (s; their nice value)",
      r ? `${r.storm.sim_agents_cpu_s}; ${SIM_NICE}` : "-",
    ],
    ["dials that ended before their Welcome (lost handshakes)", r?.dials_failed ?? "-"],
    ["handshakes per second, busiest second", r?.storm.peak_handshakes_per_s ?? "-"],
    ["gateway peak RSS through the storm (MiB)", r?.storm.gateway_peak_rss_mib ?? "-"],
    ["operations lost", r?.lost ?? "-"],
  ];
  console.log(`\n${formatTable(rows)}\n`);
  const goals = [
    {
      name: "gateway RSS < 512 MiB (steady, and at its peak through the reconnect storm)",
      value: s && r ? Math.max(s.gateway_rss_mib, r.storm.gateway_peak_rss_mib) : s?.gateway_rss_mib,
      met:
        s && r
          ? Math.max(s.gateway_rss_mib, r.storm.gateway_peak_rss_mib) * 1024 ** 2 < RSS_GOAL_BYTES
          : null,
    },
    {
      name: "heartbeat CPU < 10% of a core",
      value: s?.gateway_cpu_fraction_of_core,
      met: s ? s.gateway_cpu_fraction_of_core < CPU_GOAL : null,
    },
    {
      name: `all back within ${RECONNECT_GOAL_S} s of the SIGKILL`,
      value: r?.reconnect_all_s_from_kill,
      met: r ? r.reconnect_all_s_from_kill <= RECONNECT_GOAL_S : null,
    },
    { name: "0 operations lost", value: r?.lost, met: r ? r.lost === 0 : null },
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
      agents: AGENTS,
      workers: WORKERS,
      steady_seconds: STEADY_SECONDS,
      log_level: LOG_LEVEL,
      sim_nice: SIM_NICE,
      sim_client: SIM_CLIENT,
      exec_rate: EXEC_RATE,
    },
    results,
    goals,
    goals_met: measured.length === goals.length && measured.every((g) => g.met),
  };
}

await main();

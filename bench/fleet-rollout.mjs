#!/usr/bin/env node
// make bench (issue 33): one rollout of a fleet application over BENCH_FLEET_SERVERS (200)
// simulated agents (the agent-fanin bench's: each answers a job at once, so what is measured is
// the control plane's own work), with max_parallel 10%, against the same number of single-server
// deploys issued by a script, 10% at a time. Reports the control plane's CPU (api + gateway) and
// the wall time per server for each, and the most deployments of the rollout ever in flight,
// read from the database (not the API, whose own CPU would count). Goals: the rollout's
// control-plane CPU under 50 ms per server; at most 10% of the servers deploying at once.
// BENCH_SIM_IN_PROCESS=1 runs the simulated agents in this process instead of a child.
// Starts its own nats-server and MariaDB in a temp dir and removes all of it on exit, also after
// an error or Ctrl-C. Writes bench/results/fleet-rollout.json.
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { intEnv, log, machine, runBench, writeResults } from "./lib/bench-run.mjs";
import { cpuPerOperation, cpuSeconds } from "./lib/cpu.mjs";
import { startRelayctl } from "./lib/relayctl-stack.mjs";
import { enrollServers, startFleet, startFleetProcess } from "./lib/sim-agent.mjs";
import { formatTable, ratio } from "./lib/stats.mjs";
import { startMariadb, startNats } from "./lib/throwaway-servers.mjs";

const BENCH = "fleet-rollout";
const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(BENCH_DIR, "..");
const RESULTS_FILE = join(BENCH_DIR, "results", `${BENCH}.json`);
const SERVERS = intEnv(BENCH, "BENCH_FLEET_SERVERS", 200);
const PARALLEL = Math.max(1, Math.ceil(SERVERS / 10));
const GOAL_CPU_MS_PER_SERVER = 50;
const dist = (p) => import(pathToFileURL(join(REPO, "control-plane/dist", p)).href);

/** Polls an async condition every 50 ms until true, or throws at the deadline. */
async function waitFor(cond, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** rck_ keys take 100 requests a minute each: the set-up's calls go round them. */
let managementCalls = 0;

/** One call of the stack's API; throws with the body on an unexpected status. */
async function call(stack, method, path, body, want) {
  const automation = path.startsWith("/api/automation/");
  const apiKey = stack.apiKeys[managementCalls++ % stack.apiKeys.length];
  const res = await fetch(`${stack.baseUrl}${path}`, {
    method,
    headers: {
      "content-type": "application/json",
      ...(automation ? { authorization: `Bearer ${stack.keys[0]}` } : { "x-api-key": apiKey }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== want) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const application = (name, serverId, extra = {}) => ({
  name,
  server_id: serverId,
  linked_container_name: name,
  container_port: 8080,
  git_repository: "https://git.example.test/fleet.git",
  ...extra,
});

/** The rollout, timed: CPU of the control plane and the most servers deploying at once. */
async function rollout(stack, db, pids, appId) {
  const cpu0 = cpuSeconds(pids);
  const t0 = performance.now();
  const started = await call(
    stack,
    "POST",
    "/api/automation/v1/deploy",
    { application_id: appId, timeout_seconds: 600, strategy: { max_parallel: "10%" } },
    202,
  );
  let maxInFlight = 0;
  let status = "running";
  await waitFor(
    async () => {
      const [row] = await db("rollout_servers")
        .where({ rollout_id: started.rollout_id, state: "deploying" })
        .count({ n: "*" });
      maxInFlight = Math.max(maxInFlight, Number(row.n));
      status = (await db("rollouts").where({ id: started.rollout_id }).first("status")).status;
      return status !== "running";
    },
    600_000,
    "the rollout to end",
  );
  const wallMs = performance.now() - t0;
  const cpu = cpuPerOperation(cpu0, cpuSeconds(pids), SERVERS);
  const states = await db("rollout_servers")
    .where({ rollout_id: started.rollout_id })
    .select("state")
    .then((rows) => rows.filter((r) => r.state === "succeeded").length);
  return {
    status,
    succeeded: states,
    wall_ms: Math.round(wallMs),
    max_in_flight: maxInFlight,
    cpu_ms_per_server: cpu,
  };
}

/** The baseline: one single-server deploy per server, PARALLEL at a time, each waited for in the database. */
async function script(stack, db, pids, appIds) {
  const cpu0 = cpuSeconds(pids);
  const t0 = performance.now();
  let next = 0;
  let completed = 0;
  const worker = async () => {
    while (next < appIds.length) {
      const id = appIds[next++];
      const d = await call(
        stack,
        "POST",
        "/api/automation/v1/deploy",
        { application_id: id, timeout_seconds: 600 },
        202,
      );
      await waitFor(
        async () =>
          (await db("operations").where({ id: d.operation_id }).first("status")).status !== "running",
        600_000,
        `deployment ${d.deployment_id}`,
      );
      if ((await db("operations").where({ id: d.operation_id }).first("status")).status === "completed")
        completed++;
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  const wallMs = performance.now() - t0;
  return {
    succeeded: completed,
    wall_ms: Math.round(wallMs),
    cpu_ms_per_server: cpuPerOperation(cpu0, cpuSeconds(pids), SERVERS),
  };
}

async function main() {
  const results = await runBench(BENCH, async (group, tmp) => {
    log("starting nats-server and MariaDB");
    const [nats, dbServer] = await Promise.all([startNats(group, tmp), startMariadb(group, tmp)]);
    const stack = await startRelayctl(group, tmp, {
      natsUrl: nats.url,
      databaseUrl: dbServer.url,
      keyCount: 1,
      keyRateLimit: 1000,
      apiKeyCount: Math.ceil((SERVERS + 1) / 90),
    });
    const { openDb } = await dist("db/knex.js");
    const { createJoinToken } = await dist("cli/admin.js");
    const db = openDb(dbServer.url);
    try {
      log(`enrolling ${SERVERS} simulated agents`);
      const enrolled = await enrollServers(db, createJoinToken, {
        baseUrl: stack.baseUrl,
        tenantId: stack.tenantId,
        n: SERVERS,
        prefix: "fleet",
      });
      const fleet =
        process.env.BENCH_SIM_IN_PROCESS === "1"
          ? await startFleet(stack.gatewayUrl, enrolled)
          : await startFleetProcess(stack.gatewayUrl, enrolled, tmp);
      try {
        const ids = enrolled.map((e) => e.serverId);
        const fleetApp = await call(
          stack,
          "POST",
          "/api/applications",
          application("fleet", ids[0], { placement: { servers: ids } }),
          201,
        );
        const single = [];
        for (let i = 0; i < ids.length; i++)
          single.push(
            (await call(stack, "POST", "/api/applications", application(`single-${i}`, ids[i]), 201)).id,
          );
        const pids = { api: stack.procs.api.pid, gateway: stack.procs.gateway.pid };
        log(`a rollout over ${SERVERS} servers, max_parallel 10% (${PARALLEL})`);
        const r = await rollout(stack, db, pids, fleetApp.id);
        log(`${SERVERS} single-server deploys from a script, ${PARALLEL} at a time`);
        const s = await script(stack, db, pids, single);
        return { rollout: r, script: s };
      } finally {
        fleet.stop();
      }
    } finally {
      await db.destroy();
    }
  });
  const { rollout: r, script: s } = results;
  console.log(
    formatTable([
      ["", "rollout", "script"],
      ["servers succeeded", `${r.succeeded}/${SERVERS}`, `${s.succeeded}/${SERVERS}`],
      ["wall ms per server", (r.wall_ms / SERVERS).toFixed(1), (s.wall_ms / SERVERS).toFixed(1)],
      ["api CPU ms per server", r.cpu_ms_per_server.api, s.cpu_ms_per_server.api],
      ["gateway CPU ms per server", r.cpu_ms_per_server.gateway, s.cpu_ms_per_server.gateway],
      ["control plane CPU ms per server", r.cpu_ms_per_server.total, s.cpu_ms_per_server.total],
      ["most deploying at once", r.max_in_flight, `≤ ${PARALLEL}`],
    ]),
  );
  const goals = {
    cpu_under_50ms_per_server: r.cpu_ms_per_server.total < GOAL_CPU_MS_PER_SERVER,
    in_flight_at_most_10_percent: r.max_in_flight <= PARALLEL,
    all_succeeded: r.succeeded === SERVERS && r.status === "succeeded",
    cpu_against_script: ratio(r.cpu_ms_per_server.total, s.cpu_ms_per_server.total),
  };
  console.log(`goals: ${JSON.stringify(goals)}`);
  await writeResults(RESULTS_FILE, {
    machine: machine(),
    servers: SERVERS,
    parallel: PARALLEL,
    ...results,
    goals,
  });
}

main();

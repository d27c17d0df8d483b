#!/usr/bin/env node
// make bench: end-to-end route-sync latency for 1, 10 and 100 applications on one server through a
// real Caddy (session + sync over HTTP → MariaDB → NATS → gateway → gRPC → agent → Caddy admin
// API), against loading the same routes straight into Caddy's admin API — in one run, as ratios —
// and against a floor: the agent's per-sync catch-up with its engine (its container view's: a read
// of podman's events file from where the last stopped, or one `GET /events` since the last event
// where there is no such file: its port check cannot do with less) plus that direct load.
// The container list a sync used to make is timed alongside, for context.
// Starts its own nats-server, MariaDB and Caddy on free loopback ports in a temp dir and removes all
// of it on exit, also after an error or Ctrl-C. Writes bench/results/route-sync.json.
import { copyFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { caddyAdmin } from "@relayctl/reverse-proxy-sync";
import { ContainerView } from "../agent/dist/engine/container-view.js";
import { EngineApi } from "../agent/dist/engine/engine-api.js";
import { podmanEventsLogPath } from "../agent/dist/engine/events-file.js";
import { startCaddy } from "./lib/caddy.mjs";
import { intEnv, log, machine, runBench, writeResults } from "./lib/bench-run.mjs";
import { freePort, run as runCmd } from "./lib/processes.mjs";
import { startRelayctl } from "./lib/relayctl-stack.mjs";
import { formatTable, ratio, summarize } from "./lib/stats.mjs";
import { startMariadb, startNats } from "./lib/throwaway-servers.mjs";

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const RESULTS_FILE = join(BENCH_DIR, "results", "route-sync.json");
const BENCH = "route-sync";

function sizesEnv() {
  const raw = process.env.BENCH_SIZES || "1,10,100";
  const sizes = raw.split(",").map((s) => Number(s.trim()));
  if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 200)) {
    console.error(`route-sync: BENCH_SIZES must be a comma-separated list of 1-200, got "${raw}"`);
    process.exit(2);
  }
  return sizes;
}

const ITERATIONS = intEnv(BENCH, "BENCH_ITERATIONS", 30);
// One admin call per route reloads Caddy once per route (~0.1 s per iteration at 100 routes and up).
const PER_ROUTE_ITERATIONS = intEnv(BENCH, "BENCH_PER_ROUTE_ITERATIONS", 5);
const WARMUP = intEnv(BENCH, "BENCH_WARMUP", 3);
const SIZES = sizesEnv();
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL || "info";
const GOAL_SIZE = 100;
const GOAL_MAX_RATIO = 2.5;
// Every sync and every direct load really changes every route: the syncs alternate their upstream
// ports between two sets, the direct loads always move them to a third, so neither ever finds
// Caddy already serving what it sends (the agent would then rightly skip the write). A port set is
// index => port. The syncs' ports are published by the containers, so they are picked free
// (freePort, below the ephemeral range) when the containers start: fixed bases collided with other
// processes' ports. The direct and per-route ports are only dialled by Caddy's config, never bound,
// and sit above the ephemeral range's start (freePort never picks there), apart from both sync sets.
const SYNC_PORTS = [[], []].map((ports) => Object.assign((index) => ports[index], { ports }));
const DIRECT_PORTS = (index) => 40000 + index;
const PER_ROUTE_PORTS = (index) => 50000 + index;
/** Attempts per container: a picked port taken before podman binds it fails the run; pick again. */
const RUN_ATTEMPTS = 3;
const CADDY_SERVER = "relayctl";
const CONTAINER_PREFIX = `bench-app-${process.pid}-`;

// --- the pipeline's containers ----------------------------------------------------------------
// The agent routes only to a port its container engine shows the named container publishing, so
// every application has a real podman container publishing both sync bases' ports (runc and a
// busybox image FROM scratch, as DESIGN.md "Facts" says works here). They only need to exist:
// the bench checks Caddy's config, not traffic.

const CONTAINERS_CONF = "/tmp/relayctl-bench-containers.conf";
const IMAGE = "localhost/relayctl-bench-busybox:1";
const podmanEnv = { ...process.env, CONTAINERS_CONF };
/** Written before podman's API service or CLI first reads it (a fresh machine has none). */
const writeContainersConf = () =>
  writeFileSync(CONTAINERS_CONF, '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n');
const podman = (args) => runCmd("podman", args, { env: podmanEnv });

async function startContainers(tmp, names) {
  writeContainersConf();
  copyFileSync("/bin/busybox", join(tmp, "busybox"));
  writeFileSync(join(tmp, "Containerfile"), "FROM scratch\nCOPY busybox /bin/busybox\n");
  await podman(["build", "-q", "-t", IMAGE, "-f", join(tmp, "Containerfile"), tmp]);
  // A run that fails (a port taken...) still creates its container: every name tried is removed.
  const tried = [];
  const picked = new Set();
  /** A port free a moment ago and not already given to another container of this bench. */
  const pickPort = async () => {
    for (;;) {
      const port = await freePort();
      if (!picked.has(port)) {
        picked.add(port);
        return port;
      }
    }
  };
  const stop = () => (tried.length ? podman(["rm", "-f", "-i", "-t", "0", ...tried]) : undefined);
  try {
    for (let i = 0; i < names.length; i += 4) {
      // Settled, not all: the batch's other runs end before a failure removes what they made.
      const runs = await Promise.allSettled(
        names.slice(i, i + 4).map(async (name, k) => {
          const index = i + k;
          tried.push(name);
          for (let attempt = 1; ; attempt++) {
            const hostPorts = [await pickPort(), await pickPort()];
            const ports = hostPorts.flatMap((port, b) => ["-p", `127.0.0.1:${port}:${8001 + b}`]);
            try {
              await podman([
                "run",
                "-d",
                "--init",
                "--name",
                name,
                ...ports,
                IMAGE,
                "/bin/busybox",
                "sleep",
                "2147483647",
              ]);
              hostPorts.forEach((port, b) => {
                SYNC_PORTS[b].ports[index] = port;
              });
              break;
            } catch (err) {
              if (attempt >= RUN_ATTEMPTS) throw err;
              // The failed run may have created the container: remove it before the name is reused.
              await podman(["rm", "-f", "-i", "-t", "0", name]);
            }
          }
        }),
      );
      const failed = runs.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return stop;
}

/**
 * `podman system service` on a socket in the temp dir: the agent asks it (CONTAINER_HOST) what
 * `container inspect` would print, instead of starting the CLI per batch (agent/src/engine/engine-api.ts).
 * Ready when GET /_ping answers; resolves with the socket path.
 */
async function startPodmanApi(group, tmp) {
  writeContainersConf();
  const socketPath = join(tmp, "podman.sock");
  group.start("podman-api", "podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env: podmanEnv,
  });
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
    await new Promise((r) => setTimeout(r, 50));
  }
  return socketPath;
}

/**
 * The floor's engine part: what the agent's port check does per sync, its container view's
 * catch-up (container-view.ts `current`, the same class on the same socket and events file: a read
 * of the file from where the last stopped, once proven), timed; checked (untimed) to show every
 * container of `names` running in the view.
 */
async function timedCatchUp(view, names) {
  const t0 = performance.now();
  // As the agent's port check asks it: waiting only for inspects of the containers it names.
  const ok = await view.current(names);
  const ms = performance.now() - t0;
  const notRunning = names.filter((n) => view.lookup(n)?.running !== true);
  if (!ok || notRunning.length > 0) {
    throw new Error(`the container view is not current (${ok}) or misses ${notRunning.length} container(s)`);
  }
  return ms;
}

/**
 * For context: the container list a sync made before the view (engine-api.ts `list`: podman's own
 * list here), timed; checked (untimed) to show every container of `names` running.
 */
async function timedList(engineApi, names) {
  const t0 = performance.now();
  const listed = await engineApi.list(15);
  const ms = performance.now() - t0;
  const notRunning = names.filter((n) => listed?.get(n)?.running !== true);
  if (notRunning.length > 0) {
    throw new Error(
      `the engine list does not show ${notRunning.length} container(s) running: ${notRunning[0]}`,
    );
  }
  return ms;
}

// --- HTTP to the control plane ---------------------------------------------------------------

const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1 });

function call(baseUrl, method, path, { bearer, apiKey, body } = {}) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = {};
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  if (apiKey) headers["x-api-key"] = apiKey;
  if (payload !== undefined) {
    headers["content-type"] = "application/json";
    headers["content-length"] = Buffer.byteLength(payload);
  }
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, baseUrl), { method, agent: keepAlive, headers });
    req.on("response", (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        resolve({
          status: res.statusCode,
          headers: res.headers,
          text,
          json: text ? JSON.parse(text) : undefined,
        });
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

async function expect(res, status, what) {
  if (res.status !== status)
    throw new Error(`${what}: expected ${status}, got ${res.status}: ${res.text.slice(0, 500)}`);
  return res.json;
}

/** The management API allows 100 requests per minute per rck_ key: rotate keys, wait out a 429. */
async function createApplications(stack, count) {
  const apps = [];
  for (let i = 0; i < count; i++) {
    const body = {
      server_id: stack.serverId,
      name: `bench-app-${i}`,
      linked_container_name: `${CONTAINER_PREFIX}${i}`,
      container_port: SYNC_PORTS[0](i),
      fqdns: [`app-${i}.bench.test`, `www.app-${i}.bench.test`],
    };
    for (;;) {
      const res = await call(stack.baseUrl, "POST", "/api/applications", {
        apiKey: stack.apiKeys[i % stack.apiKeys.length],
        body,
      });
      if (res.status === 429) {
        await new Promise((r) => setTimeout(r, (Number(res.headers["retry-after"]) || 1) * 1000));
        continue;
      }
      apps.push({ ...(await expect(res, 201, "POST /api/applications")), index: i });
      break;
    }
  }
  return apps;
}

// --- one end-to-end iteration ------------------------------------------------------------------

/** Session + sync of `apps` with upstream ports from the port set `portOf`; returns the timings in ms. */
async function endToEnd(stack, apps, portOf, iteration) {
  const names = apps.map((a) => a.linked_container_name);
  const t0 = performance.now();
  const session = await expect(
    await call(stack.baseUrl, "POST", "/external-deploy/session", {
      bearer: stack.keys[0],
      body: { container_names: names, workflow_run_id: `bench-${iteration}` },
    }),
    201,
    "POST /external-deploy/session",
  );
  const t1 = performance.now();
  const deployments = apps.map((a) => ({
    container_name: a.linked_container_name,
    container_port: portOf(a.index),
    image_tag: `registry.bench.test/app-${a.index}:${iteration}`,
    force: true,
  }));
  const sync = await expect(
    await call(stack.baseUrl, "POST", "/external-deploy/sync", {
      bearer: session.session_token,
      body: { deployments },
    }),
    200,
    "POST /external-deploy/sync",
  );
  const t2 = performance.now();
  await expect(
    await call(stack.baseUrl, "DELETE", `/external-deploy/session/${session.session_id}`, {
      bearer: session.session_token,
    }),
    204,
    "DELETE /external-deploy/session",
  );
  const notSynced = sync.results.filter((r) => r.status !== "synced");
  if (sync.errors.length > 0 || notSynced.length > 0 || sync.results.length !== apps.length) {
    throw new Error(`sync did not sync every application: ${JSON.stringify(sync).slice(0, 800)}`);
  }
  return { sessionMs: t1 - t0, syncMs: t2 - t1, totalMs: t2 - t0 };
}

// --- the direct baseline -------------------------------------------------------------------------

async function liveRoutes(adminUrl) {
  const res = await caddyAdmin(adminUrl, "GET", `/config/apps/http/servers/${CADDY_SERVER}/routes`);
  if (res.status !== 200 || !Array.isArray(res.json))
    throw new Error(`GET routes: ${res.status} ${res.text}`);
  return res.json;
}

/** Checks (untimed) that Caddy serves one route per application, each to its port in `portOf`. */
async function assertLive(adminUrl, apps, portOf) {
  const dials = new Map();
  for (const route of await liveRoutes(adminUrl)) {
    const id = route["@id"] ?? "";
    if (id.startsWith("relayctl-app-")) dials.set(id.slice("relayctl-app-".length), JSON.stringify(route));
  }
  for (const a of apps) {
    const route = dials.get(a.id);
    if (!route?.includes(`"127.0.0.1:${portOf(a.index)}"`)) {
      throw new Error(`caddy does not route application ${a.id} to 127.0.0.1:${portOf(a.index)}: ${route}`);
    }
  }
}

/** The same routes with every upstream moved to the application's port in `portOf`. */
function withPorts(routes, apps, portOf) {
  const byId = new Map(apps.map((a) => [`relayctl-app-${a.id}`, a]));
  return routes.map((route) => {
    const app = byId.get(route["@id"]);
    if (!app) return route;
    return JSON.parse(
      JSON.stringify(route).replace(/"127\.0\.0\.1:\d+"/g, `"127.0.0.1:${portOf(app.index)}"`),
    );
  });
}

/** One PATCH of the server's whole routes array (the N routes + catch-all); ms until Caddy's 200. */
async function directLoad(adminUrl, routes) {
  const t0 = performance.now();
  const res = await caddyAdmin(adminUrl, "PATCH", `/config/apps/http/servers/${CADDY_SERVER}/routes`, routes);
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`direct PATCH routes: ${res.status} ${res.text}`);
  return ms;
}

/**
 * For context: the same routes loaded one admin call per route (PATCH /id/<route id>), the way a
 * script that updates each application on its own would do it; Caddy reloads once per call.
 */
async function perRouteLoad(adminUrl, routes) {
  const managed = routes.filter((r) => String(r["@id"] ?? "").startsWith("relayctl-app-"));
  const t0 = performance.now();
  for (const route of managed) {
    const res = await caddyAdmin(adminUrl, "PATCH", `/id/${route["@id"]}`, route);
    if (res.status !== 200) throw new Error(`PATCH /id/${route["@id"]}: ${res.status} ${res.text}`);
  }
  return performance.now() - t0;
}

// --- one size ------------------------------------------------------------------------------------

/**
 * Interleaves end-to-end syncs and direct loads of the same N routes, so both see the same machine
 * load.
 */
async function benchSize(stack, caddy, engineApi, view, apps, n, counter) {
  const subset = apps.slice(0, n);
  const names = subset.map((a) => a.linked_container_name);
  const samples = {
    session: [],
    sync: [],
    total: [],
    direct: [],
    catchUp: [],
    list: [],
    floor: [],
    perRoute: [],
  };
  log(
    `${n} application(s): ${WARMUP} warmup + ${ITERATIONS} timed, each an end-to-end sync and a direct load`,
  );
  for (let i = 0; i < WARMUP + ITERATIONS; i++) {
    const iteration = counter.next++;
    const ports = SYNC_PORTS[iteration % 2];
    const e2e = await endToEnd(stack, subset, ports, iteration);
    await assertLive(caddy.adminUrl, subset, ports);
    const synced = await liveRoutes(caddy.adminUrl);
    const routes = withPorts(synced, subset, DIRECT_PORTS);
    const list = await timedList(engineApi, names);
    const catchUp = await timedCatchUp(view, names);
    const direct = await directLoad(caddy.adminUrl, routes);
    await assertLive(caddy.adminUrl, subset, DIRECT_PORTS);
    const perRoute = i < WARMUP + PER_ROUTE_ITERATIONS;
    if (perRoute) {
      const ms = await perRouteLoad(caddy.adminUrl, withPorts(routes, subset, PER_ROUTE_PORTS));
      await assertLive(caddy.adminUrl, subset, PER_ROUTE_PORTS);
      if (i >= WARMUP) samples.perRoute.push(ms);
    }
    // Untimed: the server back as the agent wrote it. On a server only the agent writes to, its
    // next sync finds Caddy as it left it (the Caddy writer writes on its own view, conditionally:
    // a server changed behind its back costs it a refused write and a read, which is not the case
    // being measured; the direct loads above are the bench's, not a party of the deployment).
    await directLoad(caddy.adminUrl, synced);
    await assertLive(caddy.adminUrl, subset, ports);
    if (i < WARMUP) continue;
    samples.session.push(e2e.sessionMs);
    samples.sync.push(e2e.syncMs);
    samples.total.push(e2e.totalMs);
    samples.direct.push(direct);
    samples.catchUp.push(catchUp);
    samples.list.push(list);
    samples.floor.push(catchUp + direct);
  }
  return {
    applications: n,
    routes_in_caddy: (await liveRoutes(caddy.adminUrl)).length,
    session: summarize(samples.session),
    sync: summarize(samples.sync),
    session_and_sync: summarize(samples.total),
    direct_load: summarize(samples.direct),
    engine_catch_up: summarize(samples.catchUp),
    engine_list: summarize(samples.list),
    floor: summarize(samples.floor),
    per_route_load: summarize(samples.perRoute),
  };
}

// --- report --------------------------------------------------------------------------------------

const ROWS = [
  ["sync", "POST /external-deploy/sync"],
  ["session_and_sync", "session + sync"],
  ["direct_load", "direct PATCH to Caddy (baseline)"],
  ["floor", "floor: engine catch-up + direct PATCH"],
  ["engine_catch_up", "engine catch-up alone (context)"],
  ["engine_list", "engine list, no longer per sync (context)"],
  ["per_route_load", "one admin call per route (context)"],
];

function report(sizes) {
  const rows = [
    ["applications", "measure", "n", "p50 ms", "p99 ms", "mean ms", "p50 / direct p50", "p50 / floor p50"],
  ];
  const ratios = {};
  for (const s of sizes) {
    for (const [key, label] of ROWS) {
      const r = s[key];
      const overDirect = ratio(r.p50_ms, s.direct_load.p50_ms);
      const overFloor = ratio(r.p50_ms, s.floor.p50_ms);
      ratios[`${s.applications}_${key}_p50_over_direct_p50`] = overDirect;
      ratios[`${s.applications}_${key}_p50_over_floor_p50`] = overFloor;
      const cells = [r.p50_ms, r.p99_ms, r.mean_ms].map((ms) => ms.toFixed(2));
      rows.push([s.applications, label, r.n, ...cells, overDirect, overFloor]);
    }
  }
  console.log(`\n${formatTable(rows)}\n`);
  const at = sizes.find((s) => s.applications === GOAL_SIZE);
  const value = at ? ratio(at.sync.p50_ms, at.direct_load.p50_ms) : null;
  const goal = {
    name: `sync of ${GOAL_SIZE} applications p50 <= ${GOAL_MAX_RATIO} x direct load p50`,
    value,
    limit: GOAL_MAX_RATIO,
    met: value == null ? null : value <= GOAL_MAX_RATIO,
  };
  const verdict = goal.met == null ? "not measured" : goal.met ? "MET" : "NOT MET";
  console.log(`goal: ${goal.name}: ${value ?? "-"} → ${verdict}`);
  // Not a goal: how far the sync is from what its guarantees cost (port verification, issue 10).
  const overFloor = at ? ratio(at.sync.p50_ms, at.floor.p50_ms) : null;
  console.log(
    `floor: sync of ${GOAL_SIZE} applications p50 / (engine catch-up + direct PATCH) p50: ${overFloor ?? "-"}`,
  );
  return { ratios, goals: [goal] };
}

async function writeResultsDoc({ sizes, engineList }, { ratios, goals }) {
  const measured = goals.filter((g) => g.met != null);
  const doc = {
    bench: BENCH,
    ...machine(),
    engine_list: engineList,
    config: {
      iterations: ITERATIONS,
      warmup: WARMUP,
      per_route_iterations: PER_ROUTE_ITERATIONS,
      sizes: SIZES,
      log_level: LOG_LEVEL,
    },
    results: sizes,
    ratios,
    goals,
    goals_met: measured.length === goals.length && measured.every((g) => g.met),
  };
  await writeResults(RESULTS_FILE, doc);
  return doc;
}

// --- main ------------------------------------------------------------------------------------

async function run(group, tmp) {
  log("starting nats-server, MariaDB and Caddy");
  const [nats, db, caddy, podmanSocket] = await Promise.all([
    startNats(group, tmp),
    startMariadb(group, tmp),
    startCaddy(group, tmp),
    startPodmanApi(group, tmp),
  ]);
  log(`nats ${nats.url}, mariadb ${db.url}, caddy admin ${caddy.adminUrl}; starting gateway, api and agent`);
  const maxApps = Math.max(...SIZES);
  const stack = await startRelayctl(group, tmp, {
    natsUrl: nats.url,
    databaseUrl: db.url,
    keyCount: 1,
    keyRateLimit: 1000,
    apiKeyCount: Math.ceil((maxApps + 1) / 90),
    logLevel: LOG_LEVEL,
    agentEnv: {
      RELAYCTL_AGENT_CONTAINER_ENGINE: "podman",
      CONTAINERS_CONF,
      CONTAINER_HOST: `unix://${podmanSocket}`,
      RELAYCTL_AGENT_PROXY: "caddy",
      RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
      RELAYCTL_AGENT_CADDY_SERVER: CADDY_SERVER,
      RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
      RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
    },
  });
  log(`api ${stack.baseUrl}, agent connected as ${stack.serverId}; creating ${maxApps} applications`);
  const names = Array.from({ length: maxApps }, (_, i) => `${CONTAINER_PREFIX}${i}`);
  log(`starting ${maxApps} podman containers`);
  const stopContainers = await startContainers(tmp, names);
  const engineApi = new EngineApi("podman", podmanSocket);
  // As the agent builds it: reading podman's events file once proven (the agent's env has CONTAINERS_CONF too).
  const view = new ContainerView(engineApi, podmanEventsLogPath(podmanEnv));
  try {
    const apps = await createApplications(stack, maxApps);
    const flavour = await engineApi.listFlavour(15);
    const engineList = { socket: "podman system service", flavour, call: "EngineApi.list (agent/dist)" };
    const sizes = [];
    const counter = { next: 0 };
    for (const n of SIZES) sizes.push(await benchSize(stack, caddy, engineApi, view, apps, n, counter));
    return { sizes, engineList };
  } finally {
    view.close();
    engineApi.close();
    await stopContainers();
  }
}

async function main() {
  const measured = await runBench(BENCH, async (group, tmp) => {
    try {
      return await run(group, tmp);
    } finally {
      keepAlive.destroy();
    }
  });
  const doc = await writeResultsDoc(measured, report(measured.sizes));
  if (process.env.BENCH_STRICT === "1" && !doc.goals_met) process.exit(3);
}

await main();

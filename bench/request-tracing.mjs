// What request ids and tracing cost on the api when tracing is OFF (the default): the same
// Fastify app answering a trivial route, without and with the request-tracing plugin
// (X-Request-Id, the request's async context for the logs, the span hooks that return at
// once), in alternating rounds of the same run. Prints per-request µs and the ratio; the
// baseline it compares against is the plain app in this run, not a stored figure.
//
//   npx tsc -b && node bench/request-tracing.mjs      (BENCH_ITERATIONS, default 20000 per round)
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { formatTable, ratio, summarize } from "./lib/stats.mjs";

const require = createRequire(new URL("../control-plane/package.json", import.meta.url));
const Fastify = require("fastify");
const { requestTracing } = require("./dist/tracing/http.js");

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20_000);
const ROUNDS = 6;

async function app(withTracing) {
  const a = Fastify();
  if (withTracing) await a.register(requestTracing);
  a.post("/exec", async (req) => ({ ok: true, n: req.body.n }));
  await a.ready();
  return a;
}

/** Mean µs per request over `n` sequential injected requests. */
async function round(a, n) {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const res = await a.inject({ method: "POST", url: "/exec", payload: { n: i } });
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  }
  return ((performance.now() - t0) * 1000) / n;
}

const plain = await app(false);
const traced = await app(true);
await round(plain, 2000);
await round(traced, 2000);
const samples = { plain: [], traced: [] };
for (let r = 0; r < ROUNDS; r++) {
  samples.plain.push(await round(plain, ITERATIONS));
  samples.traced.push(await round(traced, ITERATIONS));
}
// summarize() speaks ms; these samples are µs, so its "_ms" fields read as µs here.
const p = summarize(samples.plain);
const t = summarize(samples.traced);
console.log(
  formatTable([
    ["app (µs per request, median of rounds)", "p50", "min", "max"],
    ["plain Fastify (baseline)", p.p50_ms, p.min_ms, p.max_ms],
    ["+ request ids, tracing off", t.p50_ms, t.min_ms, t.max_ms],
  ]),
);
console.log(`ratio ${ratio(t.p50_ms, p.p50_ms)}, added ${(t.p50_ms - p.p50_ms).toFixed(1)} µs per request`);
await plain.close();
await traced.close();

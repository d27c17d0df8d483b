#!/usr/bin/env node
// Self time of a V8 .cpuprofile (BENCH_CPU_PROF of exec-throughput / exec-latency / agent-fanin) by
// module or by function: node bench/cpuprofile-summary.mjs <file.cpuprofile> [mod|fn] [top=40];
// or through time, each second's busy share and its three busiest modules:
// node bench/cpuprofile-summary.mjs <file.cpuprofile> timeline [bucket ms=1000].
// The profile samples wall time: on a busy machine, native frames such as writeBuffer and
// (program) also hold the time the process waited for a core after waking its peer (MariaDB,
// NATS); read the process's CPU from /proc (the bench's cpu_ms_per_operation) beside it.
import { readFileSync } from "node:fs";

const [file, mode = "mod", top = "40"] = process.argv.slice(2);
if (!file) {
  console.error("usage: cpuprofile-summary.mjs <file.cpuprofile> [mod|fn] [top]");
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, "utf8"));
const nodes = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));

/** The package of a frame (node_modules/<pkg>), node:<core module>, or our file under dist/. */
function moduleOf(url) {
  if (!url) return "(native/vm)";
  const pkg = url.match(/node_modules\/((@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1];
  if (url.startsWith("node:")) return url;
  const ours = url.match(/\/([^/]+)\/dist\/(.*)$/);
  return ours ? `${ours[1]}/${ours[2]}` : url;
}

if (mode === "timeline") {
  const bucketUs = Number(process.argv[4] ?? 1000) * 1000;
  const buckets = [];
  let at = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    at += dt;
    const frame = nodes.get(id);
    const slot = Math.floor(at / bucketUs);
    buckets[slot] ??= { total: 0, idle: 0, mods: new Map() };
    const b = buckets[slot];
    b.total += dt;
    if (frame.functionName === "(idle)") b.idle += dt;
    else {
      const key = frame.url ? moduleOf(frame.url) : frame.functionName || "(native/vm)";
      b.mods.set(key, (b.mods.get(key) ?? 0) + dt);
    }
  });
  buckets.forEach((b, i) => {
    if (!b) return;
    const busy = b.total - b.idle;
    const tops = [...b.mods]
      .sort((x, y) => y[1] - x[1])
      .slice(0, 3)
      .map(([m, us]) => `${m} ${((100 * us) / Math.max(busy, 1)).toFixed(0)} %`);
    console.log(
      `${String((i * bucketUs) / 1e6).padStart(7)} s  busy ${((100 * busy) / b.total).toFixed(0).padStart(3)} %  ${tops.join(", ")}`,
    );
  });
  process.exit(0);
}

const self = new Map();
let total = 0;
let idle = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  const frame = nodes.get(id);
  total += dt;
  if (frame.functionName === "(idle)") {
    idle += dt;
    return;
  }
  const key =
    mode === "fn"
      ? `${frame.functionName || "(anonymous)"} ${moduleOf(frame.url)}:${frame.lineNumber + 1}`
      : moduleOf(frame.url);
  self.set(key, (self.get(key) ?? 0) + dt);
});
const busy = total - idle;
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled, ${(busy / 1e6).toFixed(2)} s busy`);
for (const [key, us] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(top))) {
  console.log(
    `${(us / 1e3).toFixed(0).padStart(8)} ms ${((100 * us) / busy).toFixed(1).padStart(5)} %  ${key}`,
  );
}

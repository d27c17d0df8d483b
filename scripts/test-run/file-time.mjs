// Loaded (node --import) into every ava worker by scripts/test-run.mjs: when the worker exits,
// writes how long its process lived, from spawn to exit, and which test file it ran, to
// $RELAYCTL_TEST_TIMES_DIR/<pid>.json. ava has no per-file timing of its own, and a worker
// runs exactly one file (workerThreads off), so the process's life is the file's cost,
// tsx's compile and the before/after hooks included. Also the CPU it used with its children
// (the control planes, agents and CLIs it ran, reaped by then: cleanupAll waits for them), from
// /proc/self/stat: on a shared machine a file's wall time says little, its CPU what it costs.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const dir = process.env.RELAYCTL_TEST_TIMES_DIR;

/** utime + stime + cutime + cstime in ms (fields 14-17 of /proc/self/stat, USER_HZ 100); undefined off Linux. */
function cpuMsWithChildren() {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // fields[0] is field 3 (state): utime is field 14, so index 11.
    return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) * 10;
  } catch {
    return undefined;
  }
}
if (dir) {
  // The test file is loaded with require (ava's "ts": "commonjs" through tsx), so it is the one
  // *.test.* module in the CommonJS cache; ava does not tell a worker's own code its file.
  const loaded = createRequire(import.meta.url).cache;
  process.on("exit", (code) => {
    const file = Object.keys(loaded).find((p) => /\.test\.[cm]?[jt]s$/.test(p));
    const ms = Math.round(performance.now());
    try {
      writeFileSync(
        join(dir, `${process.pid}.json`),
        JSON.stringify({ file, ms, cpuMs: cpuMsWithChildren(), code }),
      );
    } catch {
      // The runner has gone (Ctrl-C) and removed the directory: nothing to report to.
    }
  });
}

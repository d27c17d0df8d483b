// Loaded (node --import) into every ava worker by scripts/test-run.mjs: when the worker exits,
// writes how long its process lived, from spawn to exit, and which test file it ran, to
// $RELAYCTL_TEST_TIMES_DIR/<pid>.json. ava has no per-file timing of its own, and a worker
// runs exactly one file (workerThreads off), so the process's life is the file's cost,
// tsx's compile and the before/after hooks included.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { performance } from "node:perf_hooks";

const dir = process.env.RELAYCTL_TEST_TIMES_DIR;
if (dir) {
  // The test file is loaded with require (ava's "ts": "commonjs" through tsx), so it is the one
  // *.test.* module in the CommonJS cache; ava does not tell a worker's own code its file.
  const loaded = createRequire(import.meta.url).cache;
  process.on("exit", (code) => {
    const file = Object.keys(loaded).find((p) => /\.test\.[cm]?[jt]s$/.test(p));
    const ms = Math.round(performance.now());
    try {
      writeFileSync(join(dir, `${process.pid}.json`), JSON.stringify({ file, ms, code }));
    } catch {
      // The runner has gone (Ctrl-C) and removed the directory: nothing to report to.
    }
  });
}

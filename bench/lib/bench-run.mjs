// What every bench script shares: settings from the environment, a temp dir and a process group
// that are removed on exit (also after an error or Ctrl-C), and the results file with the machine.
import { rmSync } from "node:fs";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import { dirname, join } from "node:path";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";
import { ProcessGroup } from "./processes.mjs";

export const log = (msg) => console.log(`[bench] ${msg}`);

/**
 * An integer setting, positive unless `min` / `max` say otherwise; a bad value stops the bench with
 * one line (exit 2).
 */
export function intEnv(bench, name, fallback, { min = 1, max = Number.MAX_SAFE_INTEGER } = {}) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    const want =
      min === 1 && max === Number.MAX_SAFE_INTEGER
        ? "a positive integer"
        : `an integer from ${min} to ${max}`;
    console.error(`${bench}: ${name} must be ${want}, got "${raw}"`);
    process.exit(2);
  }
  return n;
}

/** Where and with what a run was measured. */
export function machine() {
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpu: os.cpus()[0]?.model ?? "unknown",
    cpus: os.cpus().length,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
  };
}

/** Writes `doc` to `file` atomically (relayctl's one writeFileAtomic). */
export async function writeResults(file, doc) {
  await mkdir(dirname(file), { recursive: true });
  await writeFileAtomic(file, `${JSON.stringify(doc, null, 2)}\n`);
  log(`wrote ${file}`);
}

/**
 * Runs `body(group, tmp)` and stops every process it started, newest first, and removes the temp
 * dir (kept with BENCH_KEEP_TMP=1) — after success, an error (exit 1) or a signal (exit 130).
 * Resolves with what `body` returned, once everything is stopped.
 */
export async function runBench(bench, body) {
  const keepTmp = process.env.BENCH_KEEP_TMP === "1";
  const tmp = await mkdtemp(join(os.tmpdir(), "relayctl-bench-"));
  const group = new ProcessGroup(tmp);
  let cleaning = null;
  const cleanup = () => {
    cleaning ??= (async () => {
      await group.stopAll();
      if (keepTmp) log(`kept ${tmp}`);
      else await rm(tmp, { recursive: true, force: true });
    })();
    return cleaning;
  };
  // The supervisor kills whatever still runs when the bench exits; the temp dir goes here.
  process.on("exit", () => {
    if (!keepTmp) rmSync(tmp, { recursive: true, force: true });
  });
  let interrupted = false;
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(sig, () => {
      interrupted = true;
      log(`${sig}: stopping everything`);
      cleanup().finally(() => process.exit(130));
    });
  }
  try {
    const value = await body(group, tmp);
    await cleanup();
    return value;
  } catch (err) {
    // After Ctrl-C, the processes it stopped make the step in progress fail: not worth a message.
    if (interrupted) return new Promise(() => {});
    console.error(`\n${bench}: ${err.message}`);
    await cleanup();
    process.exit(1);
  }
}

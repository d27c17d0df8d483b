// CPU time of the bench's processes, read from /proc/<pid>/stat: what each process spent per
// operation, beside the latency figures.
import { readFileSync } from "node:fs";

/** CPU seconds (user + system) each process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pids) {
  const tick = 100; // USER_HZ on Linux
  return Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => {
      try {
        const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
        return [name, (Number(f[11]) + Number(f[12])) / tick];
      } catch {
        return [name, null];
      }
    }),
  );
}

/** CPU milliseconds per operation by process, between two cpuSeconds readings. */
export function cpuPerOperation(before, after, ops) {
  const out = {};
  let total = 0;
  for (const k of Object.keys(before)) {
    if (before[k] === null || after[k] === null || ops <= 0) continue;
    const ms = ((after[k] - before[k]) * 1000) / ops;
    out[k] = Math.round(ms * 1000) / 1000;
    total += ms;
  }
  out.total = Math.round(total * 1000) / 1000;
  return out;
}

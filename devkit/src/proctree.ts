// Process trees from /proc, so a kill also reaches the shells and commands a program started.
import { readFileSync, readdirSync } from "node:fs";

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may contain spaces and parentheses: the fields after the last ')' are fixed.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[1]);
  } catch {
    return undefined;
  }
}

/** Every live descendant of pid (children, grandchildren, ...). */
export function descendants(pid: number): number[] {
  if (!Number.isInteger(pid) || pid <= 0) return [];
  const children = new Map<number, number[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const child = Number(name);
    const parent = parentOf(child);
    if (parent === undefined) continue;
    const list = children.get(parent) ?? [];
    list.push(child);
    children.set(parent, list);
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = children.get(queue.shift()!) ?? [];
    out.push(...next);
    queue.push(...next);
  }
  return out;
}

export function killQuietly(pid: number, signal: NodeJS.Signals): void {
  // Never 0 or negative: kill(-1) would signal every process we may signal.
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

export function killTreeSync(pid: number, signal: NodeJS.Signals): void {
  const tree = descendants(pid);
  killQuietly(pid, signal);
  for (const child of tree) killQuietly(child, signal);
}

/** Signals the process group led by pgid (a child spawned detached leads its own). */
export function killGroupQuietly(pgid: number, signal: NodeJS.Signals): void {
  if (!Number.isInteger(pgid) || pgid <= 0) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

// Process trees from /proc, so a kill also reaches the shells and commands a program started.
//
// A pid is only a name until its process is reaped: the kernel hands it to the next process once
// it wraps (pid_max is 32768 on these machines, and a test run starts processes fast enough to
// wrap within minutes). So a pid kept to be killed later is kept with its start time, and killed
// only while /proc still shows that same start: a kill of a reused pid would end some other
// program (CI saw a test's control plane die that way, its enroll refused right after it listened).
import { readFileSync, readdirSync } from "node:fs";

/** A process as /proc showed it: its pid and its start time (clock ticks since boot). */
export interface ProcRef {
  pid: number;
  start: string;
}

/** ppid and start time from /proc/<pid>/stat; undefined when the process is gone. */
function statOf(pid: number): { ppid: number; start: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may contain spaces and parentheses: the fields after the last ')' are fixed
    // (state is field 3 of proc(5), ppid 4, starttime 22).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(fields[1]), start: fields[19]! };
  } catch {
    return undefined;
  }
}

/** The start time of the process pid names now (clock ticks since boot); undefined when none. */
export function startTime(pid: number): string | undefined {
  return statOf(pid)?.start;
}

/** Every live descendant of pid (children, grandchildren, ...), with their start times. */
export function descendantRefs(pid: number): ProcRef[] {
  if (!Number.isInteger(pid) || pid <= 0) return [];
  const children = new Map<number, ProcRef[]>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const child = Number(name);
    const stat = statOf(child);
    if (stat === undefined) continue;
    const list = children.get(stat.ppid) ?? [];
    list.push({ pid: child, start: stat.start });
    children.set(stat.ppid, list);
  }
  const out: ProcRef[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = children.get(queue.shift()!) ?? [];
    out.push(...next);
    queue.push(...next.map((p) => p.pid));
  }
  return out;
}

/** Every live descendant of pid (children, grandchildren, ...). */
export function descendants(pid: number): number[] {
  return descendantRefs(pid).map((p) => p.pid);
}

/** Signals the process only while its pid still names the process `ref` saw (not a reused pid). */
export function killIfSame(ref: ProcRef, signal: NodeJS.Signals): void {
  if (statOf(ref.pid)?.start === ref.start) killQuietly(ref.pid, signal);
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
  const tree = descendantRefs(pid);
  killQuietly(pid, signal);
  for (const child of tree) killIfSame(child, signal);
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

// Ending a command's whole process tree at its deadline. The pty child is a
// session and process-group leader (forkpty calls setsid), and what the command
// starts stays in that group unless it sets up its own, so signalling -pgid
// reaches the tree: SIGTERM first, SIGKILL after the grace for whatever is left
// (a child that traps or ignores SIGTERM).
import { readFile, readdir } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";

const POLL_MS = 20;

/** SIGTERM the group, wait up to `graceMs` for it to empty, then SIGKILL; resolves when it is gone. */
export async function killProcessGroup(pgid: number, graceMs: number): Promise<void> {
  signalGroup(pgid, "SIGTERM");
  if (await waitUntilEmpty(pgid, graceMs)) return;
  signalGroup(pgid, "SIGKILL");
  // SIGKILL cannot be ignored; this only waits for the kernel to tear the processes down.
  await waitUntilEmpty(pgid, 5000);
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}

async function waitUntilEmpty(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!(await groupHasLiveMember(pgid))) return true;
    if (Date.now() >= deadline) return false;
    await delay(POLL_MS);
  }
}

/**
 * kill(-pgid, 0) also succeeds while only zombies are left (an orphan waits for
 * init to reap it, which some container inits do lazily), so on Linux we look for
 * a member that is not a zombie in /proc.
 */
export async function groupHasLiveMember(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  let entries: string[];
  try {
    entries = await readdir("/proc");
  } catch {
    return true; // no procfs: trust kill(2)
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "latin1").catch(() => "");
    // Fields after the command name (which may contain spaces and parentheses): state ppid pgrp ...
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z") return true;
  }
  return false;
}

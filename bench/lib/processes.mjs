// Child processes of a bench run. Each one writes its output to a log file in the run's temp dir;
// its lines are also watched so the bench can wait for the line that says it is ready (an event,
// never a fixed sleep). Every process started here is stopped by stopAll(), also after an error.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import net from "node:net";
import { join } from "node:path";
import readline from "node:readline";

const TAIL_LINES = 40;

/** A free TCP port on 127.0.0.1 (bound, read and released; the tiny race is acceptable here). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Parses a pino JSON line; returns null for anything else. */
export function parseJsonLine(text) {
  if (!text.startsWith("{")) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Runs a command to completion; rejects with its stderr when it exits non-zero. */
export function run(cmd, args, { env = process.env, cwd, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.on("error", (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`, { cause: err })));
    child.on("close", (code, signal) => {
      if (code === 0) return resolve({ stdout, stderr });
      const why = signal ? `signal ${signal}` : `exit code ${code}`;
      const out = (stderr.trim() || stdout.trim()).split("\n").slice(-15).join("\n");
      reject(new Error(`${cmd} ${args.join(" ")} failed (${why}):\n${out}`));
    });
    child.stdin.end(input ?? "");
  });
}

/** The first JSON object printed on stdout that has the given field (admin commands print JSON). */
export function jsonWithField(stdout, field) {
  for (const line of stdout.split("\n").reverse()) {
    const obj = parseJsonLine(line.trim());
    if (obj && field in obj) return obj;
  }
  try {
    const obj = JSON.parse(stdout);
    if (obj && field in obj) return obj;
  } catch {
    // not one JSON document either; reported below
  }
  throw new Error(`expected JSON with "${field}" on stdout, got:\n${stdout.trim().slice(0, 2000)}`);
}

class Proc {
  constructor(name, child, logPath) {
    this.name = name;
    this.child = child;
    this.logPath = logPath;
    this.tail = [];
    this.watchers = new Set();
    this.exitInfo = null;
    this.exited = new Promise((resolve) => {
      child.on("exit", (code, signal) => {
        this.exitInfo = { code, signal };
        for (const w of this.watchers) w.onExit();
        resolve(this.exitInfo);
      });
    });
  }

  onLine(text) {
    this.tail.push(text);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    const json = parseJsonLine(text);
    for (const w of this.watchers) w.onLine(text, json);
  }

  describeTail() {
    return `last lines of ${this.name} (${this.logPath}):\n  ${this.tail.slice(-15).join("\n  ")}`;
  }

  /**
   * Resolves with the first line (from now on, or already in the recent tail) matching `test(text, json)`.
   * Rejects when the process exits first or the deadline passes.
   */
  waitFor(test, { what, timeoutMs = 30_000 }) {
    for (const text of this.tail) {
      const json = parseJsonLine(text);
      if (test(text, json)) return Promise.resolve({ text, json });
    }
    return new Promise((resolve, reject) => {
      const watcher = {
        onLine: (text, json) => {
          if (!test(text, json)) return;
          done();
          resolve({ text, json });
        },
        onExit: () => {
          done();
          const { code, signal } = this.exitInfo;
          reject(
            new Error(
              `${this.name} exited (${signal ?? `code ${code}`}) before ${what}\n${this.describeTail()}`,
            ),
          );
        },
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no ${what} within ${timeoutMs} ms\n${this.describeTail()}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.watchers.delete(watcher);
      };
      if (this.exitInfo) return watcher.onExit();
      this.watchers.add(watcher);
    });
  }
}

/** Long-running processes of one bench run, stopped together. */
export class ProcessGroup {
  constructor(logDir) {
    this.logDir = logDir;
    this.procs = [];
  }

  start(name, cmd, args, { env = process.env, cwd } = {}) {
    const logPath = join(this.logDir, `${name}.log`);
    const log = createWriteStream(logPath);
    // detached: own process group, so Ctrl-C reaches only the bench, which stops everything in
    // order, and stopAll can signal the whole group (the agent's pty children included).
    const child = spawn(cmd, args, { env, cwd, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const proc = new Proc(name, child, logPath);
    child.on("error", (err) => proc.onLine(`spawn error: ${err.message}`));
    for (const stream of [child.stdout, child.stderr]) {
      stream.pipe(log, { end: false });
      readline
        .createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })
        .on("line", (l) => proc.onLine(l));
    }
    this.procs.push(proc);
    return proc;
  }

  /**
   * Stops the processes newest first, each before the next (the agent before the control plane,
   * the control plane before NATS and MariaDB): SIGTERM to its process group, SIGKILL after the
   * grace period.
   */
  async stopAll(graceMs = 5000) {
    for (const p of [...this.procs].reverse()) {
      if (p.exitInfo || !p.child.pid) continue;
      signalGroup(p.child.pid, "SIGTERM");
      if (await exitsWithin(p, graceMs)) continue;
      signalGroup(p.child.pid, "SIGKILL");
      await exitsWithin(p, 1000);
    }
  }
}

function exitsWithin(proc, ms) {
  let timer;
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([proc.exited.then(() => true), timeout]).finally(() => clearTimeout(timer));
}

/** Last resort from a process "exit" handler, where nothing asynchronous runs any more. */
export function killAllSync(group) {
  for (const p of group.procs) {
    if (!p.exitInfo && p.child.pid) signalGroup(p.child.pid, "SIGKILL");
  }
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

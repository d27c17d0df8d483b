// A long-running child process under supervision: its output lines kept (all of them, or a
// bounded tail) and written to a log file, waits on log lines and on exit with a deadline,
// stops that escalate to SIGKILL and also reach its descendants, and a last-resort kill of
// everything still running when this process exits. Used by the test harness, the
// benchmarks and `make dev`.
import { type ChildProcess, spawn } from "node:child_process";
import { type WriteStream, createWriteStream } from "node:fs";
import {
  type ProcRef,
  descendantRefs,
  killGroupQuietly,
  killIfSame,
  killQuietly,
  killTreeSync,
  startTime,
} from "./proctree.js";

export interface LogLine {
  stream: "stdout" | "stderr";
  text: string;
  /** The line parsed as a JSON object, when it is one (pino logs). */
  json?: Record<string, unknown>;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface SpawnOptions {
  name: string;
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Every byte of output is appended here. */
  logFile?: string;
  /** Called with each line as it arrives (make dev forwards them to the terminal). */
  onLine?: (line: LogLine) => void;
  /**
   * Own process group: a Ctrl-C in the terminal reaches only the supervisor, which stops
   * its children in order, and a stop signals the whole group.
   * @default false
   */
  detached?: boolean;
  /** Lines kept in memory; older ones are dropped (long-running dev processes). @default all */
  keepLines?: number;
}

type Waiter = { check: (line: LogLine) => boolean; fail: (err: Error) => void };

/** SIGKILL after this long when a stop signal is not obeyed. */
const KILL_WAIT_MS = 10_000;

/**
 * Children not yet reaped, by pid, with their start time. A child leaves at its 'exit' (reaped:
 * its pid is free for the kernel to hand out again), not at 'close', which a grandchild holding
 * the pipes can put off for minutes; a detached one stays until 'close', for its group.
 */
const live = new Map<number, { detached: boolean; start: string | undefined; exited: boolean }>();
process.on("exit", () => {
  // Nothing asynchronous runs any more: kill whatever is left, trees included.
  for (const [pid, { detached, start, exited }] of live) {
    const now = startTime(pid);
    // A group outlives its leader only while a member is left, and its number cannot be handed
    // out meanwhile; a live process under that number that is not our leader means it was.
    if (detached && (now === undefined || now === start)) killGroupQuietly(pid, "SIGKILL");
    if (!exited && now === start) killTreeSync(pid, "SIGKILL");
  }
});

export function parseJsonLine(text: string): Record<string, unknown> | undefined {
  if (!text.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export class ManagedProcess {
  readonly name: string;
  /** The kept lines; `lines[0]` is line number `dropped` of the whole output. */
  readonly lines: LogLine[] = [];
  readonly exited: Promise<ExitInfo>;
  readonly logFile: string | undefined;
  private dropped = 0;
  private readonly child: ChildProcess;
  private readonly log: WriteStream | undefined;
  private readonly waiters = new Set<Waiter>();
  /** Resolves on 'exit' (the process is gone); `exited` waits for 'close' (its output is all read). */
  private readonly gone: Promise<void>;
  private exitInfo: ExitInfo | undefined;
  /**
   * Descendants seen when the process was signalled, by pid and start time; reaped at stop (a pty
   * child may outlive it), and only while the pid still names them: a signal() may come minutes
   * before the stop, and a pid freed meanwhile may be another program's by then.
   */
  private readonly leftovers = new Map<number, ProcRef>();
  /** Takes this child off the exit-time kill list. */
  private readonly forget: () => void;

  constructor(private readonly opts: SpawnOptions) {
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.log = opts.logFile ? createWriteStream(opts.logFile, { flags: "a" }) : undefined;
    this.child = spawn(opts.command, opts.args, {
      env: opts.env,
      cwd: opts.cwd,
      detached: opts.detached ?? false,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const pid = this.child.pid;
    const detached = opts.detached ?? false;
    const entry = { detached, start: pid === undefined ? undefined : startTime(pid), exited: false };
    if (pid !== undefined) live.set(pid, entry);
    // Only this child's entry: once it is reaped its pid may be another child's.
    this.forget = () => {
      if (pid !== undefined && live.get(pid) === entry) live.delete(pid);
    };
    this.readLines("stdout");
    this.readLines("stderr");
    this.gone = new Promise((resolve) => {
      this.child.once("exit", () => {
        if (detached) entry.exited = true;
        else this.forget();
        resolve();
      });
      this.child.once("error", () => resolve());
    });
    this.exited = new Promise((resolve) => {
      this.child.once("error", (err) => this.finish({ code: null, signal: null }, resolve, err));
      this.child.once("close", (code, signal) => this.finish({ code, signal }, resolve));
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exitInfo === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** How it ended, once it has. */
  get exit(): ExitInfo | undefined {
    return this.exitInfo;
  }

  /** Number of the next line: pass it as `from` to wait only for lines logged after now. */
  mark(): number {
    return this.dropped + this.lines.length;
  }

  text(): string {
    return this.lines.map((l) => l.text).join("\n");
  }

  tail(n = 40): string {
    return this.lines
      .slice(-n)
      .map((l) => `  [${this.name} ${l.stream}] ${l.text}`)
      .join("\n");
  }

  /** Resolves with the first line (numbered >= from) that matches; rejects on exit or deadline. */
  waitForLine(
    match: (line: LogLine) => boolean,
    opts: { timeoutMs: number; from?: number; what: string },
  ): Promise<LogLine> {
    const found = this.lines.slice(Math.max(0, (opts.from ?? 0) - this.dropped)).find(match);
    if (found) return Promise.resolve(found);
    if (!this.running) return Promise.reject(this.failure(`exited before ${opts.what}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(this.failure(`no ${opts.what} within ${opts.timeoutMs} ms`));
      }, opts.timeoutMs);
      const waiter: Waiter = {
        check: (line) => {
          if (!match(line)) return false;
          clearTimeout(timer);
          resolve(line);
          return true;
        },
        fail: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.waiters.add(waiter);
    });
  }

  /** Waits for a JSON log line whose `msg` equals msg. */
  waitForMsg(msg: string, opts: { timeoutMs: number; from?: number }): Promise<Record<string, unknown>> {
    return this.waitForLine((l) => l.json?.msg === msg, { ...opts, what: `log line "msg":"${msg}"` }).then(
      (l) => l.json!,
    );
  }

  /**
   * Sends signal to the process only (what a crash or an operator's kill does). Descendants are
   * remembered and SIGKILLed at the next stop so nothing is left behind.
   */
  signal(signal: NodeJS.Signals): void {
    if (!this.running) return;
    this.rememberDescendants();
    killQuietly(this.pid, signal);
  }

  /** Signals (the group, when detached), waits for exit (SIGKILL after graceMs), reaps descendants. */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = KILL_WAIT_MS): Promise<ExitInfo> {
    if (this.running) {
      this.rememberDescendants();
      this.send(signal);
      const timer = setTimeout(() => this.send("SIGKILL"), graceMs);
      await this.gone;
      clearTimeout(timer);
    }
    // A descendant that inherited our pipes would hold 'close' back: reap them first.
    for (const ref of this.leftovers.values()) killIfSame(ref, "SIGKILL");
    this.leftovers.clear();
    return this.exited;
  }

  private rememberDescendants(): void {
    for (const ref of descendantRefs(this.pid)) this.leftovers.set(ref.pid, ref);
  }

  private send(signal: NodeJS.Signals): void {
    if (this.opts.detached) killGroupQuietly(this.pid, signal);
    killQuietly(this.pid, signal);
  }

  private failure(what: string): Error {
    const exit = this.exitInfo ? ` (exit code ${this.exitInfo.code}, signal ${this.exitInfo.signal})` : "";
    const log = this.logFile ? `; log ${this.logFile}` : "";
    return new Error(`${this.name}: ${what}${exit}${log}, last lines:\n${this.tail()}`);
  }

  private readLines(stream: "stdout" | "stderr"): void {
    let buffered = "";
    const source = this.child[stream]!;
    source.setEncoding("utf8");
    source.on("data", (chunk: string) => {
      this.log?.write(chunk);
      buffered += chunk;
      let nl = buffered.indexOf("\n");
      while (nl >= 0) {
        this.push({ stream, text: buffered.slice(0, nl) });
        buffered = buffered.slice(nl + 1);
        nl = buffered.indexOf("\n");
      }
    });
    source.on("end", () => {
      if (buffered.length > 0) this.push({ stream, text: buffered });
      buffered = "";
    });
  }

  private push(line: LogLine): void {
    line.json = parseJsonLine(line.text);
    this.lines.push(line);
    const keep = this.opts.keepLines;
    if (keep !== undefined && this.lines.length > keep) {
      this.lines.shift();
      this.dropped += 1;
    }
    this.opts.onLine?.(line);
    for (const waiter of this.waiters) if (waiter.check(line)) this.waiters.delete(waiter);
  }

  private finish(info: ExitInfo, resolve: (info: ExitInfo) => void, err?: Error): void {
    if (this.exitInfo) return;
    this.exitInfo = info;
    this.forget();
    this.log?.end();
    const failure = err ? new Error(`${this.name}: could not start: ${err.message}`) : this.failure("exited");
    for (const waiter of this.waiters) waiter.fail(failure);
    this.waiters.clear();
    resolve(info);
  }
}

/** Long-running processes started together and stopped together, newest first. */
export class ProcessGroup {
  readonly procs: ManagedProcess[] = [];

  start(opts: SpawnOptions): ManagedProcess {
    const proc = new ManagedProcess(opts);
    this.procs.push(proc);
    return proc;
  }

  /** Stops each process before the next (an agent before its control plane, that before its database). */
  async stopAll(signal: NodeJS.Signals = "SIGTERM", graceMs = KILL_WAIT_MS): Promise<void> {
    for (const p of [...this.procs].reverse()) await p.stop(signal, graceMs);
  }
}

// A program under test, run as a child process: every output line kept in memory and in a
// log file, waits on log lines and on exit, and kills that also reach its descendants.
import { type ChildProcess, spawn } from "node:child_process";
import { type WriteStream, createWriteStream } from "node:fs";
import { onCleanup, trackPid, untrackPid } from "./cleanup";
import { descendants, killQuietly } from "./proctree";

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
  logFile: string;
}

type Waiter = { check: (line: LogLine) => boolean; fail: (err: Error) => void };

const KILL_WAIT_MS = 10_000;

function parseJson(text: string): Record<string, unknown> | undefined {
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
  readonly lines: LogLine[] = [];
  readonly exited: Promise<ExitInfo>;
  readonly logFile: string;
  private readonly child: ChildProcess;
  private readonly log: WriteStream;
  private readonly waiters = new Set<Waiter>();
  /** Resolves on 'exit' (the process is gone); `exited` waits for 'close' (its output is all read). */
  private readonly gone: Promise<void>;
  private exitInfo: ExitInfo | undefined;
  /** Descendants seen when the process was killed; reaped at cleanup (a pty child may outlive us). */
  private readonly leftovers = new Set<number>();

  constructor(opts: SpawnOptions) {
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.log = createWriteStream(opts.logFile, { flags: "a" });
    this.child = spawn(opts.command, opts.args, {
      env: opts.env,
      cwd: opts.cwd,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const pid = this.child.pid;
    if (pid !== undefined) trackPid(pid);
    this.readLines("stdout");
    this.readLines("stderr");
    this.gone = new Promise((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.once("error", () => resolve());
    });
    this.exited = new Promise((resolve) => {
      this.child.once("error", (err) => this.finish({ code: null, signal: null }, resolve, err));
      this.child.once("close", (code, signal) => this.finish({ code, signal }, resolve));
    });
    onCleanup(async () => {
      await this.stop("SIGKILL");
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exitInfo === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Index of the next line: pass it as `from` to wait only for lines logged after now. */
  mark(): number {
    return this.lines.length;
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

  /** Resolves with the first line (at index >= from) that matches; rejects on exit or deadline. */
  waitForLine(
    match: (line: LogLine) => boolean,
    opts: { timeoutMs: number; from?: number; what: string },
  ): Promise<LogLine> {
    const found = this.lines.slice(opts.from ?? 0).find(match);
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
   * remembered and SIGKILLed at cleanup so nothing is left behind.
   */
  signal(signal: NodeJS.Signals): void {
    if (!this.running) return;
    for (const pid of descendants(this.pid)) this.leftovers.add(pid);
    killQuietly(this.pid, signal);
  }

  /** Signals, waits for exit (SIGKILL after a bound), and reaps every descendant. */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<ExitInfo> {
    if (this.running) {
      for (const pid of descendants(this.pid)) this.leftovers.add(pid);
      killQuietly(this.pid, signal);
      const timer = setTimeout(() => killQuietly(this.pid, "SIGKILL"), KILL_WAIT_MS);
      await this.gone;
      clearTimeout(timer);
    }
    // A descendant that inherited our pipes would hold 'close' back: reap them first.
    for (const pid of this.leftovers) killQuietly(pid, "SIGKILL");
    this.leftovers.clear();
    return this.exited;
  }

  private failure(what: string): Error {
    const exit = this.exitInfo ? ` (exit code ${this.exitInfo.code}, signal ${this.exitInfo.signal})` : "";
    return new Error(`${this.name}: ${what}${exit}; log ${this.logFile}, last lines:\n${this.tail()}`);
  }

  private readLines(stream: "stdout" | "stderr"): void {
    let buffered = "";
    const source = this.child[stream]!;
    source.setEncoding("utf8");
    source.on("data", (chunk: string) => {
      this.log.write(chunk);
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
    line.json = parseJson(line.text);
    this.lines.push(line);
    for (const waiter of this.waiters) if (waiter.check(line)) this.waiters.delete(waiter);
  }

  private finish(info: ExitInfo, resolve: (info: ExitInfo) => void, err?: Error): void {
    if (this.exitInfo) return;
    this.exitInfo = info;
    untrackPid(this.pid);
    this.log.end();
    const failure = err ? new Error(`${this.name}: could not start: ${err.message}`) : this.failure("exited");
    for (const waiter of this.waiters) waiter.fail(failure);
    this.waiters.clear();
    resolve(info);
  }
}

/** process.env without RELAYCTL_* (the tests set exactly what they mean) plus extra. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("RELAYCTL_")) env[k] = v;
  return { ...env, ...extra };
}

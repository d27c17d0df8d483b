// Runs a command in a pty (node-pty) with stdout and stderr kept apart, capped,
// and a hard deadline that kills the whole process tree.
//
// node-pty can lose the tail of the output when a command prints a lot and exits
// at once (the pty is torn down before the last reads). So the command never exits
// on its own: a small shell wrapper runs it, prints an end marker carrying a
// per-run nonce and the exit code, and blocks on the tty until we write the ack
// ("\n"). Everything before the marker is the command's stdout; only then does the
// wrapper exit. stderr goes through a FIFO (see stderr-fifo.ts), drained up to our
// own sentinel, which we write once the marker has arrived. Both streams are
// scrubbed of the job's secrets on the way (scrubber.ts), after the marker scan.
//
// Spawning the pty (fork, setsid, exec of the shell) is most of an agent's time
// for a short command, so the runner keeps launchers ready (see WarmLaunchers
// below): a pty already spawned, its shell blocked opening a FIFO. A run writes a
// small script into that FIFO (cd, then the wrapper, through env(1) and a fresh
// shell when the job has env of its own), so the command still gets a new process
// and an environment made only of the agent's and its own; each launcher serves
// one run, and a new one is started in the background once the run is over. A
// small long-lived shell starts them (launcher-host.ts), so the agent's own
// process is not forked per run; node-pty spawns them where that shell cannot.
import { randomBytes } from "node:crypto";
import { closeSync, constants, existsSync, openSync, statSync, unlink, writeSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute } from "node:path";
import { performance } from "node:perf_hooks";
import * as pty from "@lydell/node-pty";
import { type HostPty, type LaunchedPty, LauncherHost } from "./launcher-host.js";
import { MarkerScanner, StreamCapture } from "./output-capture.js";
import { killProcessGroup } from "./process-tree.js";
import type { CommandRunner, RunOutcome, RunRequest } from "./runner.js";
import { Scrubber, SecretMatcher } from "./scrubber.js";
import { FifoPool, StderrFifo, spawnMkfifo } from "./stderr-fifo.js";

// $1 command, $2 stderr FIFO, $3 nonce. The subshell keeps an `exit` or `exec` in
// the command from skipping the marker. `read` waits for the agent's ack. stdin is
// /dev/null: jobs are non-interactive, and a prompt must fail at once rather than
// hang until the deadline (stdout stays the tty, so tools still see a terminal).
const WRAPPER = `( eval "$1" ) </dev/null 2>"$2"; rc=$?; printf '\\037RCEND-%s-%03d\\037' "$3" "$rc"; read -r _; exit $rc`;

// $1 the launcher's FIFO. Opening it blocks until the agent opens its write end;
// `.` then runs what the agent wrote, which ends in an exec of the wrapper's shell.
const LAUNCHER = `. "$1"`;

/** Largest launch script written at once into an empty FIFO (a pipe holds 64 KiB); bigger runs are spawned cold. */
const MAX_LAUNCH_SCRIPT_BYTES = 60_000;

/** How long the wrapper may take to exit after the ack before it is killed (it should exit at once). */
const EXIT_AFTER_ACK_MS = 10_000;

export interface PtyRunnerOptions {
  /** Shell that runs the wrapper and the command (POSIX sh compatible). */
  shell: string;
  /** Cap of stdout and of stderr each, in bytes. */
  outputCapBytes: number;
  /** SIGTERM → SIGKILL grace at the deadline. */
  killGraceMs: number;
  /** Private directory for the stderr FIFOs (emptied at start); default a fresh temp directory. */
  fifoDir?: string;
  /**
   * Launchers kept ready (a pty and shell spawned ahead, waiting for a command);
   * 0 spawns every run on its request path. Runs beyond those ready are spawned cold.
   * Two, so that one is ready while the one after a run is still starting.
   * @default 2
   */
  warmLaunchers?: number;
  /**
   * Launchers started by a small long-lived shell (launcher-host.ts) rather than
   * by node-pty's fork of the agent; node-pty is used when the host cannot.
   * @default true
   */
  launcherHost?: boolean;
}

/** How the runs of a runner started, for tests and benchmarks. */
export interface PtyRunnerStats {
  /** Runs handed to a launcher spawned ahead. */
  warm: number;
  /** Runs spawned on their request path. */
  cold: number;
  /** Launchers started by the host, and by node-pty. */
  launchers: { host: number; nodePty: number };
  /** Batches of stderr FIFOs made through the host, and by mkfifo forked from the agent. */
  fifoBatches: { host: number; agent: number };
}

export class PtyRunner implements CommandRunner {
  readonly #fifos: FifoPool;
  readonly #warm: WarmLaunchers;
  readonly stats: PtyRunnerStats;

  constructor(readonly options: PtyRunnerOptions) {
    const host =
      (options.launcherHost ?? true)
        ? new LauncherHost(options.shell, { ...stringEnv(process.env), TERM: "dumb" })
        : undefined;
    const fifoBatches = { host: 0, agent: 0 };
    const fromAgent = (paths: string[]) => {
      fifoBatches.agent++;
      return spawnMkfifo(paths);
    };
    // The host forks mkfifo too; the agent does when the host cannot.
    const mkfifo = host
      ? (paths: string[]) =>
          host.mkfifo(paths).then(
            () => {
              fifoBatches.host++;
            },
            () => fromAgent(paths),
          )
      : fromAgent;
    this.#fifos = new FifoPool(options.fifoDir, undefined, undefined, mkfifo);
    this.#warm = new WarmLaunchers(options.shell, options.warmLaunchers ?? 2, this.#fifos, host);
    this.stats = { warm: 0, cold: 0, launchers: this.#warm.started, fifoBatches };
    this.#warm.fill();
  }

  /** Why launchers are not started by the host (then node-pty spawns them), or undefined when they are. */
  get launcherHostBroken(): string | undefined {
    return this.#warm.hostBroken;
  }

  async run(request: RunRequest): Promise<RunOutcome> {
    const started = performance.now();
    const cwd = request.workingDirectory || homedir();
    const problem = checkDirectory(cwd);
    if (problem) return notRun(problem, started);

    const nonce = randomBytes(8).toString("hex");
    const secrets = new SecretMatcher(request.secrets ?? Object.values(request.env));
    const scrubber = () => (secrets.empty ? undefined : new Scrubber(secrets));
    const onStderr = request.onOutput && ((text: string) => request.onOutput!("stderr", text));
    const stderr = new StderrFifo(
      await this.#fifos.take(),
      this.options.outputCapBytes,
      nonce,
      scrubber(),
      onStderr,
    );
    const args = [request.command, stderr.path, nonce];
    const warm = this.#warm.launch(launchScript(this.options.shell, request.env, cwd, args));
    if (warm) {
      this.stats.warm++;
      const run = new PtyRun(warm, stderr, nonce, scrubber(), request, this.options, started);
      // Replace the launcher once this run is over, not while its output is being read.
      void run.outcome.then(() => setImmediate(() => this.#warm.fill()));
      return run.outcome;
    }
    this.stats.cold++;
    let child: LaunchedPty;
    try {
      const env: Record<string, string> = { ...stringEnv(process.env), TERM: "dumb", ...request.env };
      child = pty.spawn(this.options.shell, ["-c", WRAPPER, "relayctl", ...args], {
        name: env.TERM,
        cols: 200,
        rows: 50,
        cwd,
        env,
        encoding: null, // raw Buffers: we decode ourselves (see StreamCapture)
      });
    } catch (err) {
      stderr.abandon();
      return notRun(`cannot start ${this.options.shell}: ${(err as Error).message}`, started);
    }
    const run = new PtyRun(child, stderr, nonce, scrubber(), request, this.options, started);
    this.#fifos.refill(); // now, while the command starts up, not on the next run's path
    // A launcher that was not ready, or died, is made up for once this run is over.
    void run.outcome.then(() => setImmediate(() => this.#warm.fill()));
    return run.outcome;
  }

  async close(): Promise<void> {
    await this.#warm.close();
    await this.#fifos.close();
  }
}

/** A pty spawned ahead, its shell blocked opening `fifo` until it is given a run. */
interface Launcher {
  child: LaunchedPty;
  fifo: string;
  exited: boolean;
  /** Started by the host: ready once it has printed its pid. */
  hosted?: HostPty;
}

/**
 * The launchers kept ready. Each is a pty whose shell (the agent's environment,
 * TERM=dumb, nothing of any job) waits in the open of its own FIFO. launch()
 * takes one whose shell has got there (a non-blocking open of the write end
 * succeeds only when a reader is waiting), writes the run's script in one write,
 * and closes: the shell reads to EOF and runs it. The wrapper runs in the
 * launcher's process (itself, or a shell it execs), so the pid, and with it the
 * process group a deadline kills, is the launcher's as a cold spawn's is its own.
 */
class WarmLaunchers {
  #ready: Launcher[] = [];
  #spawning = 0;
  #closed = false;
  readonly #host: LauncherHost | undefined;
  /** Launchers started by the host, by node-pty (tests and benchmarks). */
  readonly started = { host: 0, nodePty: 0 };

  constructor(
    readonly shell: string,
    readonly size: number,
    readonly fifos: FifoPool,
    host: LauncherHost | undefined,
  ) {
    this.#host = host;
  }

  /** Why launchers are spawned by node-pty rather than the host, or undefined. */
  get hostBroken(): string | undefined {
    return this.#host ? this.#host.broken : "not used";
  }

  /** Spawns launchers in the background until `size` are ready or spawning. */
  fill(): void {
    while (!this.#closed && this.#ready.length + this.#spawning < this.size) {
      this.#spawning++;
      this.#spawn()
        .catch(() => {}) // no launcher: runs are spawned cold meanwhile
        .finally(() => this.#spawning--);
    }
  }

  async #spawn(): Promise<void> {
    const fifo = await this.fifos.take();
    if (this.#closed) {
      unlink(fifo, () => {});
      return;
    }
    const hosted = this.#host?.start(fifo);
    if (hosted) {
      this.started.host++;
      const launcher: Launcher = { child: hosted, fifo, exited: false, hosted };
      hosted.onExit(() => {
        launcher.exited = true;
        this.#drop(launcher);
        // A host that failed falls back to node-pty: make up for this one.
        if (!hosted.pid) this.fill();
      });
      this.#ready.push(launcher);
      return;
    }
    this.started.nodePty++;
    const env: Record<string, string> = { ...stringEnv(process.env), TERM: "dumb" };
    const child = pty.spawn(this.shell, ["-c", LAUNCHER, "relayctl", fifo], {
      name: env.TERM,
      cols: 200,
      rows: 50,
      cwd: homedir(),
      env,
      encoding: null,
    });
    const launcher: Launcher = { child, fifo, exited: false };
    child.onExit(() => {
      launcher.exited = true;
      this.#drop(launcher);
    });
    this.#ready.push(launcher);
  }

  /** Hands `script` to a ready launcher; undefined when none is ready or the script does not fit. */
  launch(script: string | undefined): LaunchedPty | undefined {
    if (script === undefined || Buffer.byteLength(script) > MAX_LAUNCH_SCRIPT_BYTES) return undefined;
    for (let i = 0; i < this.#ready.length; i++) {
      const launcher = this.#ready[i]!;
      if (launcher.exited || (launcher.hosted && !launcher.hosted.ready)) continue;
      let fd: number;
      try {
        fd = openSync(launcher.fifo, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch {
        continue; // ENXIO: its shell has not reached the open yet
      }
      this.#ready.splice(i, 1);
      try {
        // The pipe is empty and its only reader is this launcher: one write of
        // less than its capacity goes in whole.
        const bytes = Buffer.from(script);
        if (writeSync(fd, bytes) !== bytes.length) throw new Error("short write");
      } catch {
        closeSync(fd);
        this.#kill(launcher);
        continue;
      } finally {
        unlink(launcher.fifo, () => {});
      }
      closeSync(fd);
      return launcher.child;
    }
    return undefined;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const ready = this.#ready;
    this.#ready = [];
    for (const launcher of ready) this.#kill(launcher);
    this.#host?.close();
  }

  #drop(launcher: Launcher): void {
    const at = this.#ready.indexOf(launcher);
    if (at < 0) return;
    this.#ready.splice(at, 1);
    releaseFifo(launcher.fifo);
  }

  #kill(launcher: Launcher): void {
    releaseFifo(launcher.fifo);
    // Hung up: a launcher of the host still on its way gets SIGHUP, or fails to start.
    launcher.hosted?.destroy();
    if (!launcher.child.pid) return;
    try {
      process.kill(-launcher.child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

/**
 * Removes a launcher's FIFO, first letting go a launcher blocked opening it (it waits there
 * for a writer, in no session yet when its pty was closed early, so no hangup reaches it, and
 * its pid is not known to kill: it would wait for ever, and the host's shell that started it
 * with it, holding the host's stdout, which kept a CI test worker from exiting). Opened
 * O_RDWR (Linux: never blocks) it has a writer, so its open returns; once this closes, it
 * reads an empty script and exits. A launcher that comes to its open after the unlink fails it
 * and exits too.
 */
export function releaseFifo(path: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_NONBLOCK);
  } catch {
    // already gone
  }
  unlink(path, () => {
    if (fd !== undefined) closeSync(fd);
  });
}

/**
 * The script a launcher runs: cd, then the wrapper. A job with env of its own
 * execs the wrapper's shell through env(1) (env sets any name as given, where a
 * shell's `export` would trip over names it treats specially); without, the
 * launcher's shell (the same shell, started with the same environment) runs the
 * wrapper itself, one exec fewer on the run's path. Every value is single-quoted.
 * Undefined when a run cannot be expressed that way (a NUL, an env name with "=",
 * a relative directory): it is then spawned cold, with the same result.
 */
function launchScript(
  shell: string,
  env: Record<string, string>,
  cwd: string,
  args: string[],
): string | undefined {
  if (!isAbsolute(cwd)) return undefined;
  const pairs = Object.entries(env).map(([name, value]) => `${name}=${value}`);
  for (const [name] of Object.entries(env)) if (name === "" || name.includes("=")) return undefined;
  const words = [...pairs, shell, "-c", WRAPPER, "relayctl", ...args];
  if ([cwd, ...words].some((value) => value.includes("\0"))) return undefined;
  const cd = `cd ${quote(cwd)} || exit 126\n`;
  if (pairs.length === 0) return `${cd}set -- ${args.map(quote).join(" ")}\n${WRAPPER}\n`;
  if (!HAS_ENV_BINARY) return undefined;
  return `${cd}exec ${[ENV_BINARY, "--", ...words].map(quote).join(" ")}\n`;
}

const ENV_BINARY = "/usr/bin/env";
const HAS_ENV_BINARY = existsSync(ENV_BINARY);

function quote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The life of one spawned command: output, handshake, exit, deadline. */
class PtyRun {
  readonly outcome: Promise<RunOutcome>;
  readonly #stdout: StreamCapture;
  #resolve!: (outcome: RunOutcome) => void;
  #finished = false;
  #timedOut = false;
  #exit: { exitCode: number; signal?: number } | undefined;
  #deadlineTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly child: LaunchedPty,
    readonly stderr: StderrFifo,
    nonce: string,
    scrubber: Scrubber | undefined,
    readonly request: RunRequest,
    readonly options: PtyRunnerOptions,
    readonly started: number,
  ) {
    this.outcome = new Promise((resolve) => {
      this.#resolve = resolve;
    });
    this.#stdout = new StreamCapture(
      "stdout",
      options.outputCapBytes,
      new MarkerScanner(`\x1fRCEND-${nonce}-`, 4),
      true,
      scrubber,
      request.onOutput && ((text) => request.onOutput!("stdout", text)),
    );
    // node-pty types onData as string; with `encoding: null` it hands over Buffers.
    child.onData((data) => this.#onData(data as unknown as Buffer));
    child.onExit((exit) => this.#onExit(exit));
    if (request.deadlineSeconds > 0) {
      // setTimeout fires at once past 2^31-1 ms (~24.8 days); deadline_seconds is a uint32.
      const ms = Math.min(request.deadlineSeconds * 1000, 2 ** 31 - 1);
      this.#deadlineTimer = setTimeout(() => this.#onDeadline(), ms);
    }
  }

  #onData(chunk: Buffer): void {
    if (!this.#stdout.write(chunk) || this.#finished || this.#timedOut) return;
    // The end marker: the command has exited and all its stdout is in.
    const exitCode = Number.parseInt(this.#stdout.marker.suffix!.slice(0, 3), 10);
    this.child.write("\n");
    const guard = setTimeout(() => this.#killWrapper(), EXIT_AFTER_ACK_MS);
    guard.unref();
    this.child.onExit(() => clearTimeout(guard));
    void this.#finish("completed", exitCode);
  }

  #onExit(exit: { exitCode: number; signal?: number }): void {
    this.#exit = exit;
    if (this.#finished || this.#timedOut) return;
    // The wrapper died before printing the marker (killed from outside): report what we have.
    this.#stdout.end();
    void this.#finish("completed", exitCodeOf(exit));
  }

  async #onDeadline(): Promise<void> {
    if (this.#finished) return;
    this.#timedOut = true;
    await killProcessGroup(this.child.pid, this.options.killGraceMs).catch(() => {});
    if (!this.#exit) await new Promise<void>((resolve) => this.child.onExit(() => resolve()));
    this.#stdout.end();
    const seconds = this.request.deadlineSeconds;
    await this.#finish(
      "timeout",
      exitCodeOf(this.#exit!),
      `deadline of ${seconds} s passed; process tree killed`,
    );
  }

  async #finish(status: RunOutcome["status"], exitCode: number, error?: string): Promise<void> {
    if (this.#finished) return;
    this.#finished = true;
    clearTimeout(this.#deadlineTimer);
    const stderr = await this.stderr.finish();
    const durationMs = Math.round(performance.now() - this.started);
    this.#resolve({ status, exitCode, stdout: this.#stdout.text(), stderr, durationMs, error });
  }

  #killWrapper(): void {
    try {
      process.kill(this.child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

// Synchronous on purpose: a stat of a local path takes microseconds, while the
// thread-pool round trip of fs.promises.stat adds ~0.3-0.5 ms to every command.
function checkDirectory(dir: string): string | undefined {
  try {
    if (!statSync(dir).isDirectory()) return `working directory is not a directory: ${dir}`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return `working directory does not exist: ${dir}`;
    return `working directory is not usable: ${dir} (${code})`;
  }
  return undefined;
}

function notRun(error: string, started: number): RunOutcome {
  const durationMs = Math.round(performance.now() - started);
  return { status: "failed", exitCode: -1, stdout: "", stderr: "", durationMs, error };
}

/** Shell convention: a process ended by signal n exits 128+n. */
function exitCodeOf(exit: { exitCode: number; signal?: number }): number {
  return exit.signal ? 128 + exit.signal : exit.exitCode;
}

function stringEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

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
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { homedir } from "node:os";
import { performance } from "node:perf_hooks";
import * as pty from "node-pty";
import { MarkerScanner, StreamCapture } from "./output-capture.js";
import { killProcessGroup } from "./process-tree.js";
import type { CommandRunner, RunOutcome, RunRequest } from "./runner.js";
import { Scrubber, SecretMatcher } from "./scrubber.js";
import { FifoPool, StderrFifo } from "./stderr-fifo.js";

// $1 command, $2 stderr FIFO, $3 nonce. The subshell keeps an `exit` or `exec` in
// the command from skipping the marker. `read` waits for the agent's ack. stdin is
// /dev/null: jobs are non-interactive, and a prompt must fail at once rather than
// hang until the deadline (stdout stays the tty, so tools still see a terminal).
const WRAPPER = `( eval "$1" ) </dev/null 2>"$2"; rc=$?; printf '\\037RCEND-%s-%03d\\037' "$3" "$rc"; read -r _; exit $rc`;

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
}

export class PtyRunner implements CommandRunner {
  readonly #fifos: FifoPool;

  constructor(readonly options: PtyRunnerOptions) {
    this.#fifos = new FifoPool(options.fifoDir);
  }

  async run(request: RunRequest): Promise<RunOutcome> {
    const started = performance.now();
    const cwd = request.workingDirectory || homedir();
    const problem = checkDirectory(cwd);
    if (problem) return notRun(problem, started);

    const nonce = randomBytes(8).toString("hex");
    const secrets = new SecretMatcher(request.secrets ?? Object.values(request.env));
    const scrubber = () => (secrets.empty ? undefined : new Scrubber(secrets));
    const stderr = new StderrFifo(await this.#fifos.take(), this.options.outputCapBytes, nonce, scrubber());
    let child: pty.IPty;
    try {
      const env: Record<string, string> = { ...stringEnv(process.env), TERM: "dumb", ...request.env };
      child = pty.spawn(
        this.options.shell,
        ["-c", WRAPPER, "relayctl", request.command, stderr.path, nonce],
        {
          name: env.TERM,
          cols: 200,
          rows: 50,
          cwd,
          env,
          encoding: null, // raw Buffers: we decode ourselves (see StreamCapture)
        },
      );
    } catch (err) {
      stderr.abandon();
      return notRun(`cannot start ${this.options.shell}: ${(err as Error).message}`, started);
    }
    const run = new PtyRun(child, stderr, nonce, scrubber(), request, this.options, started);
    this.#fifos.refill(); // now, while the command starts up, not on the next run's path
    return run.outcome;
  }

  close(): Promise<void> {
    return this.#fifos.close();
  }
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
    readonly child: pty.IPty,
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

// Runs an engine CLI (or git) as a plain child process: argv only (no shell),
// optional stdin, a hard deadline (SIGTERM, then SIGKILL) or an abort signal,
// capped output, and the job's secrets scrubbed from what it printed before
// anything leaves this module.
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { Scrubber, SecretMatcher, scrubText } from "../runner/scrubber.js";
import type { EngineOutcome } from "./engine.js";

/** Engine CLIs print little; this bounds memory if one misbehaves. */
const OUTPUT_CAP_BYTES = 1024 * 1024;
const KILL_GRACE_MS = 2000;
const TRUNCATED = "\n[output truncated]\n";

export interface CliRun {
  binary: string;
  args: string[];
  stdin?: string;
  deadlineSeconds: number;
  /** Values removed from stdout and stderr (in their common encodings too). */
  secrets?: string[];
  /**
   * Variables set for the child on top of the agent's own environment. They may
   * hold secrets (a container's env values): the environment is the one place
   * a value may travel, never argv.
   */
  env?: Record<string, string>;
  cwd?: string;
  /** Aborting kills the child like the deadline does (the job's own deadline passed). */
  signal?: AbortSignal;
  /**
   * Output as it comes (stdout and stderr interleaved), already scrubbed: a
   * secret split across chunks is still caught (the runner's streaming
   * Scrubber). The outcome still carries the whole output. `stream` says which
   * of the two it came from.
   */
  onOutput?: (text: string, stream: OutputStream) => void;
  /**
   * Releases text the scrubber holds back (the last secret-length characters,
   * in case a secret continues) after this much quiet on its stream, so output
   * that stops is seen at once (a followed log). A value printed in two pieces
   * further apart than this is not caught (secret-forms.ts: "a value printed in
   * pieces"). @default never: held until more output or the end
   */
  flushAfterMs?: number;
  /** Keep the output for the outcome (capped); false for a long stream read through onOutput. @default true */
  keepOutput?: boolean;
}

export type OutputStream = "stdout" | "stderr";

/** One stream's text for onOutput: UTF-8 decoded across chunks, then scrubbed. */
class LiveText {
  readonly #decoder = new StringDecoder("utf8");
  readonly #scrubber: Scrubber;
  #quiet: NodeJS.Timeout | undefined;

  constructor(
    matcher: SecretMatcher,
    readonly out: (text: string) => void,
    readonly flushAfterMs?: number,
  ) {
    this.#scrubber = new Scrubber(matcher);
  }

  push(chunk: Buffer): void {
    const text = this.#scrubber.write(this.#decoder.write(chunk));
    if (text) this.out(text);
    if (this.flushAfterMs === undefined) return;
    clearTimeout(this.#quiet);
    this.#quiet = setTimeout(() => this.#release(), this.flushAfterMs);
  }

  end(): void {
    clearTimeout(this.#quiet);
    const text = this.#scrubber.write(this.#decoder.end()) + this.#scrubber.end();
    if (text) this.out(text);
  }

  /** The held-back tail, scrubbed as if the stream ended there; the scrubber starts afresh. */
  #release(): void {
    const text = this.#scrubber.end();
    if (text) this.out(text);
  }
}

/**
 * The absolute path of `binary`, looked up on the agent's own PATH: a child's
 * env may carry an application's variable named PATH, which must not decide
 * which program runs. Unchanged when it is a path already or is not found.
 */
export function resolveBinary(binary: string, path = process.env.PATH ?? ""): string {
  if (binary.includes("/") || isAbsolute(binary)) return binary;
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return binary;
}

class Capped {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  push(chunk: Buffer): void {
    const room = OUTPUT_CAP_BYTES - this.size;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
    if (part.length < chunk.length) this.truncated = true;
    this.chunks.push(part);
    this.size += part.length;
  }

  text(): string {
    return Buffer.concat(this.chunks).toString("utf8") + (this.truncated ? TRUNCATED : "");
  }
}

/** The job's secrets out of a whole output, in every form the runner's scrubber knows. */
export function scrub(text: string, secrets: string[]): string {
  return secrets.length === 0 ? text : scrubText(new SecretMatcher(secrets), text);
}

export function runCli(run: CliRun): Promise<EngineOutcome> {
  const started = Date.now();
  const secrets = run.secrets ?? [];
  return new Promise((resolve) => {
    const stdout = new Capped();
    const stderr = new Capped();
    const onOutput = run.onOutput;
    const matcher = onOutput ? new SecretMatcher(secrets) : undefined;
    const live =
      matcher && onOutput
        ? [
            new LiveText(matcher, (text) => onOutput(text, "stdout"), run.flushAfterMs),
            new LiveText(matcher, (text) => onOutput(text, "stderr"), run.flushAfterMs),
          ]
        : [];
    const keep = run.keepOutput !== false;
    let timedOut = false;
    let settled = false;
    const child = spawn(resolveBinary(run.binary), run.args, {
      stdio: ["pipe", "pipe", "pipe"],
      shell: false,
      cwd: run.cwd,
      env: run.env ? { ...process.env, ...run.env } : process.env,
    });
    const finish = (o: Omit<EngineOutcome, "stdout" | "stderr" | "durationMs">): void => {
      if (settled) return;
      settled = true;
      for (const l of live) l.end();
      clearTimeout(deadline);
      run.signal?.removeEventListener("abort", kill);
      resolve({
        ...o,
        stdout: scrub(stdout.text(), secrets),
        stderr: scrub(stderr.text(), secrets),
        durationMs: Date.now() - started,
      });
    };
    const kill = () => {
      timedOut = true;
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), KILL_GRACE_MS).unref();
    };
    const deadline = setTimeout(kill, Math.max(1, run.deadlineSeconds) * 1000);
    if (run.signal?.aborted) kill();
    else run.signal?.addEventListener("abort", kill, { once: true });
    child.stdout.on("data", (c: Buffer) => {
      if (keep) stdout.push(c);
      live[0]?.push(c);
    });
    child.stderr.on("data", (c: Buffer) => {
      if (keep) stderr.push(c);
      live[1]?.push(c);
    });
    // A CLI that exits without reading stdin makes the write fail with EPIPE: harmless.
    child.stdin.on("error", () => {});
    child.stdin.end(run.stdin ?? "");
    child.on("error", (err) => {
      const reason = `cannot run ${run.binary}: ${err.message}`;
      finish({ status: "failed", exitCode: -1, error: reason });
    });
    child.on("close", (code, signal) => {
      const exitCode = code ?? 128 + signalNumber(signal);
      if (timedOut) {
        const why = run.signal?.aborted
          ? "killed: the job's deadline passed"
          : `killed after the ${run.deadlineSeconds} s deadline`;
        finish({ status: "timeout", exitCode, error: why });
      } else {
        finish({ status: "completed", exitCode });
      }
    });
  });
}

function signalNumber(signal: NodeJS.Signals | null): number {
  return signal === "SIGKILL" ? 9 : signal === "SIGTERM" ? 15 : 1;
}

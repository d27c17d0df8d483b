// The built `relayctl` CLI (cli/dist/main.js) as a process, the way a person or a
// script runs it: its own config dir, its exit code, stdout and stderr kept apart.
import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { makeTempDir, onCleanup } from "./cleanup";
import { REPO_ROOT } from "./programs";

export const CLI_MAIN = resolve(REPO_ROOT, "cli/dist/main.js");

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string>;
  input?: string;
  timeoutMs?: number;
}

/** A user of the CLI: one config dir (their login) and a base environment. */
export class CliUser {
  readonly configDir = makeTempDir("relayctl-cli");

  constructor(readonly env: Record<string, string> = {}) {}

  private environment(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const base: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("RELAYCTL_")) base[k] = v;
    return { ...base, RELAYCTL_CONFIG_DIR: this.configDir, RELAYCTL_NO_BROWSER: "1", ...this.env, ...extra };
  }

  spawn(args: string[], opts: CliOptions = {}): ChildProcess {
    const child = spawn(process.execPath, [CLI_MAIN, ...args], {
      env: this.environment(opts.env),
      stdio: ["pipe", "pipe", "pipe"],
    });
    onCleanup(async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    return child;
  }

  /** Runs to the end; never rejects on a non-zero exit (tests assert the code). */
  run(args: string[], opts: CliOptions = {}): Promise<CliResult> {
    const child = this.spawn(args, opts);
    return collect(child, opts);
  }
}

export function collect(child: ChildProcess, opts: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolveRun, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => {
      stdout += d;
    });
    child.stderr!.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolveRun({ code, stdout, stderr });
    });
    // A child that exits before reading its input closes the pipe: EPIPE here is no failure of it.
    child.stdin!.on("error", () => {});
    child.stdin!.end(opts.input ?? "");
  });
}

/** Resolves with the first match of `pattern` in the child's stderr (as it arrives). */
export function waitForStderr(
  child: ChildProcess,
  pattern: RegExp,
  timeoutMs = 30_000,
): Promise<RegExpExecArray> {
  return new Promise((resolveWait, reject) => {
    let seen = "";
    const timer = setTimeout(
      () => reject(new Error(`no ${pattern} on stderr within ${timeoutMs} ms:\n${seen}`)),
      timeoutMs,
    );
    child.stderr!.on("data", (d) => {
      seen += d;
      const m = pattern.exec(seen);
      if (m) {
        clearTimeout(timer);
        resolveWait(m);
      }
    });
  });
}

// One-shot commands (admin steps, enroll, ssh-keygen): run to completion, output collected,
// and the JSON answer a CLI prints picked out of it.
import { spawn } from "node:child_process";

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, which is then closed. */
  input?: string;
  /** Killed (SIGKILL) after this long. @default no limit */
  timeoutMs?: number;
}

/** Runs a command to completion; rejects with its last output lines when it does not exit 0. */
export function run(
  command: string,
  args: string[],
  opts: RunOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: opts.env, cwd: opts.cwd, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer =
      opts.timeoutMs === undefined ? undefined : setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${command}: ${err.message}`, { cause: err }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve({ stdout, stderr });
      const why = signal ? `signal ${signal}` : `exit code ${code}`;
      const out = (stderr.trim() || stdout.trim()).split("\n").slice(-15).join("\n");
      reject(
        Object.assign(new Error(`${command} ${args.join(" ")} failed (${why}):\n${out}`), { stdout, stderr }),
      );
    });
    // A command that exits, or closes its stdin, before reading it makes the write fail with
    // EPIPE: that is not the command's failure (its exit code says how it went).
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.input ?? "");
  });
}

/**
 * The JSON object a CLI printed (with `field`, when given): the whole stdout, else its last
 * line that is one. Our CLIs print their answer last, after any log lines.
 */
export function jsonAnswer(stdout: string, what: string, field?: string): Record<string, unknown> {
  const candidates = [stdout.trim(), ...stdout.trim().split("\n").reverse()];
  for (const text of candidates) {
    try {
      const value: unknown = JSON.parse(text.trim());
      if (value === null || typeof value !== "object") continue;
      if (field === undefined || field in value) return value as Record<string, unknown>;
    } catch {
      // try the next candidate
    }
  }
  const wanted = field ? ` with "${field}"` : "";
  throw new Error(`${what}: no JSON object${wanted} in output:\n${stdout.trim().slice(0, 2000)}`);
}

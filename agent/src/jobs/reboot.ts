// Reboot jobs: run the configured reboot command (RELAYCTL_AGENT_REBOOT_COMMAND,
// default `systemctl reboot`) through /bin/sh -c. Success sends no result: the
// machine goes down, and the gateway completes the operation when this agent
// says Hello with a new boot id. A command that cannot start or exits non-zero
// is reported FAILED with its stderr.
import { execFile } from "node:child_process";
import { type JobResult, JobStatus } from "@relayctl/proto";

/** `systemctl reboot` returns at once; a command still running after this is given up on. */
const COMMAND_TIMEOUT_MS = 120_000;
const OUTPUT_CAP_BYTES = 64 * 1024;

/** Resolves undefined when the command exited 0 (the reboot is under way), else a FAILED result. */
export function runRebootCommand(command: string, operationId: string): Promise<JobResult | undefined> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      "/bin/sh",
      ["-c", command],
      { timeout: COMMAND_TIMEOUT_MS, maxBuffer: OUTPUT_CAP_BYTES, killSignal: "SIGKILL" },
      (err, stdout, stderr) => {
        if (!err) return resolve(undefined);
        const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean };
        const exitCode = typeof e.code === "number" ? e.code : -1;
        const reason = e.killed
          ? `reboot command did not finish within ${COMMAND_TIMEOUT_MS / 1000} s`
          : typeof e.code === "number"
            ? `reboot command exited with code ${e.code}`
            : `reboot command could not run: ${e.message}`;
        resolve({
          operationId,
          status: JobStatus.JOB_STATUS_FAILED,
          exitCode,
          stdout: String(stdout),
          stderr: String(stderr) || `${reason}\n`,
          durationMs: Date.now() - started,
          error: reason,
          detail: undefined,
        });
      },
    );
  });
}

// An agent's JobResult as the operations store records it.
import { type JobResult, JobStatus } from "@relayctl/proto";
import type { FinalResult } from "../operations/store.js";

const STATUS: Partial<Record<JobStatus, FinalResult["status"]>> = {
  [JobStatus.JOB_STATUS_COMPLETED]: "completed",
  [JobStatus.JOB_STATUS_FAILED]: "failed",
  [JobStatus.JOB_STATUS_TIMEOUT]: "timeout",
};

/**
 * A job the agent could not run (a missing working directory, a spawn error)
 * has no output of its own, only its `error`: that is its stderr, as for the
 * operations the control plane fails itself, so a caller reading the result sees
 * why (and the stored result, its hash in the audit chain, says the same).
 */
export function finalResult(r: JobResult): FinalResult {
  return {
    status: STATUS[r.status] ?? "failed",
    exit_code: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr || r.stdout ? r.stderr : r.error,
    duration_ms: r.durationMs,
    error: r.error || null,
    detail: r.detail,
  };
}

// An agent's JobResult as the operations store records it.
import { type JobResult, JobStatus } from "@relayctl/proto";
import type { FinalResult } from "../operations/store.js";

const STATUS: Partial<Record<JobStatus, FinalResult["status"]>> = {
  [JobStatus.JOB_STATUS_COMPLETED]: "completed",
  [JobStatus.JOB_STATUS_FAILED]: "failed",
  [JobStatus.JOB_STATUS_TIMEOUT]: "timeout",
};

export function finalResult(r: JobResult): FinalResult {
  return {
    status: STATUS[r.status] ?? "failed",
    exit_code: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr,
    duration_ms: r.durationMs,
    error: r.error || null,
    detail: r.detail,
  };
}

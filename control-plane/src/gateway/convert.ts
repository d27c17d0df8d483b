// Bus JSON <-> agent.v1 protobuf messages.
import { type GatewayMessage, type JobResult, JobStatus } from "@relayctl/proto";
import type { JobEnvelope } from "../bus/job-bus.js";
import type { FinalResult } from "../operations/store.js";

export function jobMessage(job: JobEnvelope): GatewayMessage {
  return {
    msg: {
      $case: "job",
      job: {
        operationId: job.operation_id,
        kind: {
          $case: "exec",
          exec: {
            command: job.exec.command,
            workingDirectory: job.exec.working_directory,
            env: job.exec.env,
            deadlineSeconds: job.exec.deadline_seconds,
          },
        },
      },
    },
  };
}

const STATUS: Record<number, FinalResult["status"]> = {
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
  };
}

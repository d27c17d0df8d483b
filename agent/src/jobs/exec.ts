// An ExecJob from the gateway → one run of the command runner → a JobResult.
import { type ExecJob, type JobResult, JobStatus } from "@relayctl/proto";
import type { CommandRunner, RunStatus } from "../runner/runner.js";
import { traceCommand } from "../tracing/index.js";

const STATUS: Record<RunStatus, JobStatus> = {
  completed: JobStatus.JOB_STATUS_COMPLETED,
  failed: JobStatus.JOB_STATUS_FAILED,
  timeout: JobStatus.JOB_STATUS_TIMEOUT,
};

export async function runExecJob(
  runner: CommandRunner,
  operationId: string,
  job: ExecJob,
): Promise<JobResult> {
  const outcome = await traceCommand(() =>
    runner.run({
      command: job.command,
      workingDirectory: job.workingDirectory,
      env: job.env,
      deadlineSeconds: job.deadlineSeconds,
    }),
  );
  return {
    operationId,
    status: STATUS[outcome.status],
    exitCode: outcome.exitCode,
    stdout: outcome.stdout,
    stderr: outcome.stderr,
    durationMs: outcome.durationMs,
    error: outcome.error ?? "",
    detail: undefined,
  };
}

/** The result of a job that could not be run at all. */
export function failedResult(operationId: string, error: string): JobResult {
  return {
    operationId,
    status: JobStatus.JOB_STATUS_FAILED,
    exitCode: -1,
    stdout: "",
    stderr: "",
    durationMs: 0,
    error,
    detail: undefined,
  };
}

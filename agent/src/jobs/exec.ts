// An ExecJob from the gateway → one run of the command runner → a JobResult.
// With stream_output, the output also goes out as it comes (LogsOutput lines,
// scrubbed like the result), for `relayctl exec` to print live.
import { type ExecJob, type JobResult, JobStatus, type LogLine, LogsEnd } from "@relayctl/proto";
import type { CommandRunner, RunStatus } from "../runner/runner.js";
import { traceCommand } from "../tracing/index.js";
import { type EmitOutput, LineBatcher } from "./logs.js";

const STATUS: Record<RunStatus, JobStatus> = {
  completed: JobStatus.JOB_STATUS_COMPLETED,
  failed: JobStatus.JOB_STATUS_FAILED,
  timeout: JobStatus.JOB_STATUS_TIMEOUT,
};

export async function runExecJob(
  runner: CommandRunner,
  operationId: string,
  job: ExecJob,
  emit?: EmitOutput,
): Promise<JobResult> {
  let seq = 0;
  const send = (lines: LogLine[], end = LogsEnd.LOGS_END_UNSPECIFIED) =>
    emit?.({ operationId, seq: ++seq, lines, end, endDetail: "" });
  const live = job.streamOutput && emit ? new LineBatcher((lines) => send(lines)) : undefined;
  const outcome = await traceCommand(() =>
    runner.run({
      command: job.command,
      workingDirectory: job.workingDirectory,
      env: job.env,
      deadlineSeconds: job.deadlineSeconds,
      ...(live ? { onOutput: (stream: "stdout" | "stderr", text: string) => live.add(text, stream) } : {}),
    }),
  );
  if (live) {
    // The last line without its break, then the end: sent before the result, on the same stream.
    live.flush();
    send([], LogsEnd.LOGS_END_COMPLETE);
  }
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

// The JobResult of a deployment: COMPLETED (exit 0) with a short summary a
// person reads in stdout once the new version serves, or FAILED (exit 1) /
// TIMEOUT (exit -1) with the reason in stderr and error; the DeployReport rides
// in the detail either way.
import { type DeployJob, type DeployReport, type JobResult, JobStatus } from "@relayctl/proto";
import type { PipelineDeps, State } from "./pipeline.js";

export function summary(job: DeployJob, s: State, deps: PipelineDeps): string {
  const lines: string[] = [];
  if (s.commit) lines.push(`commit ${s.commit.sha.slice(0, 12)} ${s.commit.message}`);
  lines.push(`image ${s.image}`, `container ${s.name} on 127.0.0.1:${s.hostPort}`);
  if (s.upstream)
    lines.push(`serving ${job.fqdns.join(", ")} through ${deps.target.proxy.kind} -> ${s.upstream}`);
  else lines.push(`listening on 127.0.0.1:${s.hostPort} (no proxy route)`);
  if (s.previous.length > 0)
    lines.push(`retiring ${s.previous.join(", ")} after ${deps.settings.drainSeconds} s`);
  return `${lines.join("\n")}\n`;
}

export function completed(
  operationId: string,
  stdout: string,
  report: DeployReport,
  startedAt: number,
): JobResult {
  return {
    operationId,
    status: JobStatus.JOB_STATUS_COMPLETED,
    exitCode: 0,
    stdout,
    stderr: "",
    durationMs: Date.now() - startedAt,
    error: "",
    detail: { $case: "deploy", deploy: report },
  };
}

export function ended(
  operationId: string,
  timedOut: boolean,
  reason: string,
  report: DeployReport,
  startedAt: number,
) {
  const result: JobResult = {
    operationId,
    status: timedOut ? JobStatus.JOB_STATUS_TIMEOUT : JobStatus.JOB_STATUS_FAILED,
    exitCode: timedOut ? -1 : 1,
    stdout: "",
    stderr: reason,
    durationMs: Date.now() - startedAt,
    error: reason,
    detail: { $case: "deploy", deploy: report },
  };
  return result;
}

// Container-engine jobs from the gateway (restart, registry login and logout) →
// one call of the ContainerEngine port → a JobResult. The registry password
// stays in this call: it is never logged and the engine scrubs it from output.
import {
  type JobResult,
  JobStatus,
  type RegistryLoginJob,
  type RegistryLogoutJob,
  type RestartJob,
} from "@relayctl/proto";
import { type ContainerEngine, type EngineOutcome, validContainerName } from "../engine/engine.js";
import { failedResult } from "./exec.js";

/** Used when the gateway sends no deadline (an older control plane). */
const DEFAULT_DEADLINE_SECONDS = 120;

const STATUS: Record<EngineOutcome["status"], JobStatus> = {
  completed: JobStatus.JOB_STATUS_COMPLETED,
  failed: JobStatus.JOB_STATUS_FAILED,
  timeout: JobStatus.JOB_STATUS_TIMEOUT,
};

function toResult(operationId: string, o: EngineOutcome): JobResult {
  return {
    operationId,
    status: STATUS[o.status],
    exitCode: o.exitCode,
    stdout: o.stdout,
    stderr: o.stderr,
    durationMs: o.durationMs,
    error: o.error ?? "",
    detail: undefined,
  };
}

const deadline = (s: number) => s || DEFAULT_DEADLINE_SECONDS;

export async function runRestartJob(engine: ContainerEngine, operationId: string, job: RestartJob) {
  // The control plane validates too; the agent does not trust the wire.
  if (!validContainerName(job.containerName)) {
    return failedResult(operationId, `invalid container name '${job.containerName.slice(0, 300)}'`);
  }
  return toResult(operationId, await engine.restart(job.containerName, deadline(job.deadlineSeconds)));
}

export async function runRegistryLoginJob(
  engine: ContainerEngine,
  operationId: string,
  job: RegistryLoginJob,
) {
  const outcome = await engine.login(
    { registry: job.registry, username: job.username, password: job.password },
    deadline(job.deadlineSeconds),
  );
  return toResult(operationId, outcome);
}

/**
 * A logout is always `completed` (the contract: a failed logout is a warning,
 * never an error): an engine that could not run or was killed gives a non-zero
 * exit code with the reason in stderr.
 */
export async function runRegistryLogoutJob(
  engine: ContainerEngine,
  operationId: string,
  job: RegistryLogoutJob,
) {
  const o = await engine.logout(job.registry, deadline(job.deadlineSeconds));
  if (o.status === "completed") return toResult(operationId, o);
  const stderr = [o.stderr, o.error].filter(Boolean).join(o.stderr.endsWith("\n") ? "" : "\n");
  return toResult(operationId, {
    ...o,
    status: "completed",
    exitCode: o.exitCode === 0 ? -1 : o.exitCode,
    stderr,
    error: undefined,
  });
}

// Bus JSON <-> agent.v1 protobuf messages.
import { type GatewayMessage, type Job, type JobResult, JobStatus, type RouteSyncJob } from "@relayctl/proto";
import type { JobEnvelope, RouteSyncEnvelope } from "../bus/job-bus.js";
import type { FinalResult } from "../operations/store.js";

function jobKind(job: JobEnvelope): Job["kind"] {
  if ("exec" in job) {
    return {
      $case: "exec",
      exec: {
        command: job.exec.command,
        workingDirectory: job.exec.working_directory,
        env: job.exec.env,
        deadlineSeconds: job.exec.deadline_seconds,
      },
    };
  }
  if ("restart" in job) {
    return {
      $case: "restart",
      restart: { containerName: job.restart.container_name, deadlineSeconds: job.restart.deadline_seconds },
    };
  }
  if ("route_sync" in job) return { $case: "routeSync", routeSync: routeSyncJob(job.route_sync) };
  if ("reboot" in job) return { $case: "reboot", reboot: { reason: job.reboot.reason } };
  if ("registry_login" in job) {
    const l = job.registry_login;
    return {
      $case: "registryLogin",
      registryLogin: {
        registry: l.registry,
        username: l.username,
        password: l.password,
        deadlineSeconds: l.deadline_seconds,
      },
    };
  }
  return {
    $case: "registryLogout",
    registryLogout: {
      registry: job.registry_logout.registry,
      deadlineSeconds: job.registry_logout.deadline_seconds,
    },
  };
}

function routeSyncJob(r: RouteSyncEnvelope): RouteSyncJob {
  return {
    routes: r.routes.map((route) => ({
      applicationId: route.application_id,
      containerName: route.container_name,
      containerPort: route.container_port,
      imageTag: route.image_tag,
      fqdns: route.fqdns,
    })),
    knownApplicationIds: r.known_application_ids,
    removeApplicationIds: r.remove_application_ids,
    deadlineSeconds: r.deadline_seconds,
  };
}

export function jobMessage(job: JobEnvelope): GatewayMessage {
  return { msg: { $case: "job", job: { operationId: job.operation_id, kind: jobKind(job) } } };
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

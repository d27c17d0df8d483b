// Names the pipeline gives what it creates (contract of issue 11): the
// container `<base>-<deployment id first 8>` with the labels by which retire finds
// the old containers of an application, and the built image
// `relayctl/<application id>:<commit sha first 12>-<build key first 12>`. The image
// carries no label (image-ledger.ts says why): its repository names the application,
// and its tag the build, so one commit built two ways is two tags and a tag found
// again is the same build (image-step.ts: a redeploy of a commit builds nothing).
import { createHash } from "node:crypto";
import { validContainerName } from "../engine/engine.js";

export const APPLICATION_LABEL = "relayctl.application";
export const DEPLOYMENT_LABEL = "relayctl.deployment";
/**
 * The server whose agent deployed it: the agent that restarts it after a crash (podman,
 * containers/crash-hold.ts), when several agents share one engine (a test machine's).
 */
export const SERVER_LABEL = "relayctl.server";

/** What a Dockerfile build's result depends on; equal keys build the same image. */
export interface BuildInputs {
  applicationId: string;
  commitSha: string;
  dockerfile: string;
  context: string;
  engine: string;
}

/** The build's key: a hash of its inputs (the JSON of a fixed field order), hex. */
export function buildKey(i: BuildInputs): string {
  const fields = [i.applicationId, i.commitSha, i.dockerfile, i.context, i.engine];
  return createHash("sha256").update(JSON.stringify(fields)).digest("hex");
}

export function containerName(baseName: string, deploymentId: string): string {
  return `${baseName}-${deploymentId.replace(/-/g, "").slice(0, 8)}`;
}

/** The repository of an application's built images: `relayctl/<application id>`. */
export function builtImageRepository(applicationId: string): string {
  return `relayctl/${applicationId}`;
}

export function builtImageTag(applicationId: string, commitSha: string, key: string): string {
  return `${builtImageRepository(applicationId)}:${commitSha.slice(0, 12)}-${key.slice(0, 12)}`;
}

export function deployLabels(
  applicationId: string,
  deploymentId: string,
  serverId?: string,
): Record<string, string> {
  const labels = { [APPLICATION_LABEL]: applicationId, [DEPLOYMENT_LABEL]: deploymentId };
  return serverId ? { ...labels, [SERVER_LABEL]: serverId } : labels;
}

/** Why the names of a job cannot be used, or undefined. */
export function namingProblem(baseName: string, deploymentId: string): string | undefined {
  if (!/^[0-9a-f-]{8,64}$/i.test(deploymentId)) return "invalid deployment id";
  if (!validContainerName(containerName(baseName, deploymentId))) {
    return `invalid container base name '${baseName.slice(0, 100)}'`;
  }
  return undefined;
}

/**
 * An image reference as registries spell it (`host[:port]/path[:tag][@digest]`),
 * never starting with "-", so it cannot be read as a CLI flag.
 */
export function validImageReference(ref: string): boolean {
  return ref.length <= 512 && /^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$/.test(ref);
}

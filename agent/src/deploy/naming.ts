// Names the pipeline gives what it creates (contract of issue 11): the
// container `<base>-<deployment id first 8>`, the image
// `relayctl/<application id>:<commit sha first 12>` (the deployment id's first 8
// without a commit) and the labels both carry, by which retire finds the old
// containers of an application.
import { validContainerName } from "../engine/engine.js";

export const APPLICATION_LABEL = "relayctl.application";
export const DEPLOYMENT_LABEL = "relayctl.deployment";

export function containerName(baseName: string, deploymentId: string): string {
  return `${baseName}-${deploymentId.replace(/-/g, "").slice(0, 8)}`;
}

export function builtImageTag(applicationId: string, commitSha: string, deploymentId: string): string {
  const tag = commitSha ? commitSha.slice(0, 12) : deploymentId.replace(/-/g, "").slice(0, 8);
  return `relayctl/${applicationId}:${tag}`;
}

export function deployLabels(applicationId: string, deploymentId: string): Record<string, string> {
  return { [APPLICATION_LABEL]: applicationId, [DEPLOYMENT_LABEL]: deploymentId };
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

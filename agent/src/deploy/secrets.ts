// Every secret of a deployment job, which every log line, progress message and
// result is scrubbed of: env values, the git credential's password, a password
// written into the repository URL, and the registry password of an image pull.
import type { DeployJob } from "@relayctl/proto";

/** The job's secrets (values shorter than the scrubber's minimum are left to it). */
export function jobSecrets(job: DeployJob): string[] {
  const out = [...Object.values(job.env), job.source?.credential?.password ?? ""];
  out.push(...urlPassword(job.source?.repository ?? ""));
  if (job.build?.$case === "image") out.push(job.build.image.auth?.password ?? "");
  return out.filter((s) => s !== "");
}

/** A password written into a repository URL (https://user:pass@host/...), as written and decoded. */
export function urlPassword(repository: string): string[] {
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/@:]*:([^/@]*)@/i.exec(repository);
  if (!m?.[1]) return [];
  let decoded = m[1];
  try {
    decoded = decodeURIComponent(m[1]);
  } catch {}
  return [...new Set([m[1], decoded])];
}

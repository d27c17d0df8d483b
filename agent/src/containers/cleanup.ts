// The CleanupJob: a deleted application leaves nothing on the machine. It runs
// in the application's deploy turn (dispatcher.ts), after any deployment
// received before it. Its route comes off the proxy, then every container
// labelled relayctl.application=<id> is removed (rm -f: stopped and removed at
// once, as nothing serves through it any more), then every image of the application
// (deploy/app-images.ts: its tags, and what the image ledger recorded for it), and
// its ledger entries. Done twice it finds nothing and completes: the control plane sends
// it again when it cannot know the first one ran (a pending cleanup, re-sent at
// the agent's next Hello).
import { type CleanupJob, type JobResult, JobStatus } from "@relayctl/proto";
import { applicationImages, removalTargets } from "../deploy/app-images.js";
import type { ImageLedger } from "../deploy/image-ledger.js";
import { APPLICATION_LABEL } from "../deploy/naming.js";
import type { ContainerEngine, EngineOutcome } from "../engine/engine.js";
import { failedResult } from "../jobs/exec.js";

const DEFAULT_DEADLINE_SECONDS = 120;

const lines = (o: EngineOutcome) =>
  o.stdout
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
const ok = (o: EngineOutcome) => o.status === "completed" && o.exitCode === 0;
const failedWith = (o: EngineOutcome, re: RegExp) =>
  o.status === "completed" && o.exitCode !== 0 && re.test(`${o.stderr}${o.stdout}`);
/** An rm of an image another process removed first (a layer race may leave it: not this). */
const alreadyGone = (o: EngineOutcome) => failedWith(o, /image not known|no such image/i);

export async function runCleanupJob(
  engine: ContainerEngine,
  operationId: string,
  job: CleanupJob,
  /** Takes the application's route off the proxy; a line for the output, or an error. */
  removeRoute: ((applicationId: string) => Promise<string>) | undefined,
  ledger: ImageLedger,
): Promise<JobResult> {
  // The control plane sends a UUID; the agent does not trust the wire (it ends up in a filter).
  if (!/^[0-9a-f-]{8,64}$/i.test(job.applicationId))
    return failedResult(operationId, "invalid application id");
  const started = Date.now();
  const deadline = Date.now() + (job.deadlineSeconds || DEFAULT_DEADLINE_SECONDS) * 1000;
  const opts = () => ({ deadlineSeconds: Math.max(1, Math.ceil((deadline - Date.now()) / 1000)) });
  const errors: string[] = [];
  const removedContainers: string[] = [];
  const removedImages: string[] = [];
  const done: string[] = [];
  if (removeRoute) {
    try {
      const line = await removeRoute(job.applicationId);
      if (line) done.push(line);
    } catch (err) {
      errors.push(`remove the route: ${(err as Error).message}`);
    }
  }

  const ps = await engine.containersByLabel(APPLICATION_LABEL, job.applicationId, opts());
  if (!ok(ps)) errors.push(`list containers: ${ps.error ?? ps.stderr.trim()}`);
  for (const name of lines(ps)) {
    const rm = await engine.remove(name, opts());
    if (ok(rm)) removedContainers.push(name);
    else errors.push(`rm ${name}: ${rm.error ?? rm.stderr.trim()}`);
  }
  // The store is shared with other applications' retires and cleanups: a list
  // that meets an image being removed is asked again (app-images.ts), and an
  // image gone by the time it is removed is gone, which is what was asked.
  const listed = await applicationImages(engine, ledger, job.applicationId, opts);
  if (listed.images === undefined)
    errors.push(`list images: ${listed.failed.error ?? listed.failed.stderr.trim()}`);
  for (const image of listed.images ?? []) {
    for (const ref of removalTargets(image)) {
      const rmi = await engine.removeImage(ref, opts());
      if (ok(rmi)) removedImages.push(ref);
      else if (!alreadyGone(rmi)) errors.push(`image rm ${ref}: ${rmi.error ?? rmi.stderr.trim()}`);
    }
  }
  // Nothing of it is left to find: what the ledger said of it goes too.
  if (errors.length === 0) await ledger.forget(job.applicationId);

  const summary = [
    ...done,
    ...removedContainers.map((n) => `removed container ${n}`),
    ...removedImages.map((r) => `removed image ${r}`),
  ];
  return {
    operationId,
    status: errors.length === 0 ? JobStatus.JOB_STATUS_COMPLETED : JobStatus.JOB_STATUS_FAILED,
    exitCode: errors.length === 0 ? 0 : 1,
    stdout: summary.length > 0 ? `${summary.join("\n")}\n` : "nothing left to remove\n",
    stderr: errors.length > 0 ? `${errors.join("\n")}\n` : "",
    durationMs: Date.now() - started,
    error: errors.length > 0 ? "some containers or images could not be removed" : "",
    // The report only when nothing is left: it is what ends the control plane's pending cleanup.
    detail:
      errors.length === 0
        ? {
            $case: "cleanup",
            cleanup: { applicationId: job.applicationId, removedContainers, removedImages },
          }
        : undefined,
  };
}

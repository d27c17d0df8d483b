// The retire step, after the result went out and outside the application's
// deploy turn (deployer.ts): the old containers keep serving requests that were
// in flight for the drain period, then the containers the deployment found
// before its start step (never "every container but mine": a later deployment
// may have started its own since) are stopped and removed. Then retention: the
// application's built images are removed but the new one and those the job
// listed to keep (the images of its last releases, chosen by the control plane:
// a rollback needs no rebuild), best effort. A job that lists none (a control
// plane from before retention) keeps the newest other image, as before.
import { setTimeout as delay } from "node:timers/promises";
import type { CallOptions, ContainerEngine } from "../engine/engine.js";
import { outputOf } from "./context.js";
import { applicationImages, bareRef, removalTargets } from "./app-images.js";
import type { ImageLedger } from "./image-ledger.js";
import { APPLICATION_LABEL } from "./naming.js";
import type { StepRecorder } from "./recorder.js";

/** Bounds each engine call; retire runs past the job's deadline by design. */
const CALL: CallOptions = { deadlineSeconds: 60 };
const STOP_GRACE_SECONDS = 10;

/** What a deployment that switched hands to its retire. */
export interface RetirePlan {
  applicationId: string;
  deploymentId: string;
  /** The new container and its image: never touched. */
  keep: string;
  keepImage: string;
  /** The new image's engine id (`sha256:...`). */
  keepImageId: string;
  /** The job's keep_images: ids or references of the releases' images to keep. */
  keepImages: string[];
  /** The application's containers listed before the start step (the new one excluded). */
  old: string[];
  drainSeconds: number;
  secrets: string[];
}

/** An ISO time for log lines that must say when (the log's own times are per step). */
export const stamp = (at = Date.now()) => new Date(at).toISOString();

/** Waits out the drain of the old containers (they still serve what was in flight). */
export async function drain(rec: StepRecorder, plan: RetirePlan): Promise<void> {
  if (plan.old.length === 0 || plan.drainSeconds <= 0) return;
  rec.log("retire", `${stamp()} draining for ${plan.drainSeconds} s`);
  await delay(plan.drainSeconds * 1000);
}

/**
 * Stops and removes the old containers that are still there (an earlier retire
 * may have removed some: a container that is gone is not a failure). True when
 * the retire goes on to the image prune; false when it ended here: nothing to
 * retire (step succeeded), or a container that could not be removed (step
 * failed; still labelled, it is on the next deployment's list to retire).
 */
export async function removeOld(
  engine: ContainerEngine,
  rec: StepRecorder,
  plan: RetirePlan,
): Promise<boolean> {
  if (plan.old.length === 0) {
    rec.succeed("retire", "no old container to retire");
    return false;
  }
  const opts = { ...CALL, secrets: plan.secrets };
  const listed = await engine.containersByLabel(APPLICATION_LABEL, plan.applicationId, opts);
  if (listed.status !== "completed" || listed.exitCode !== 0) {
    rec.fail("retire", `cannot list the application's containers: ${outputOf(listed) || listed.error}`);
    return false;
  }
  const present = new Set(lines(listed.stdout));
  const old = plan.old.filter((n) => n !== plan.keep && present.has(n));
  const failures: string[] = [];
  for (const name of old) {
    await engine.stop(name, STOP_GRACE_SECONDS, opts);
    const rm = await engine.remove(name, opts);
    if (rm.status === "completed" && rm.exitCode === 0) rec.log("retire", `${stamp()} removed ${name}`);
    else failures.push(`${name}: ${outputOf(rm).trim() || rm.error}`);
  }
  if (failures.length > 0) {
    rec.fail("retire", `could not remove ${failures.join("; ")}`);
    return false;
  }
  rec.log("retire", old.length > 0 ? `retired ${old.join(", ")}` : "the old containers were already gone");
  return true;
}

/**
 * Removes the application's built images but the new one and the kept ones.
 * Runs inside the application's deploy turn: between a build and its start an
 * image is used by no container yet, and only the turn keeps a prune away from
 * it. An image a container uses is refused by the engine.
 */
export async function pruneImages(
  engine: ContainerEngine,
  ledger: ImageLedger,
  rec: StepRecorder,
  plan: RetirePlan,
): Promise<void> {
  const opts = { ...CALL, secrets: plan.secrets };
  const { images: listed } = await applicationImages(engine, ledger, plan.applicationId, () => opts);
  if (listed === undefined) return;
  const keep = new Set([...plan.keepImages.map(bareRef), bareRef(plan.keepImage), plan.keepImageId]);
  // Without a list from the control plane, the newest other image is the one a rollback needs:
  // the one a deployment ran last (the ledger), else the engine's newest (an image from before it).
  const usedAt = new Map(ledger.ofApplication(plan.applicationId).map((e) => [e.imageId, e.usedAtMs]));
  const newestOther =
    plan.keepImages.length === 0
      ? listed
          .filter((i) => !i.refs.some((r) => keep.has(r)) && !keep.has(i.id))
          .sort((a, b) => (usedAt.get(b.id) ?? -1) - (usedAt.get(a.id) ?? -1))[0]
      : undefined;
  if (newestOther) keep.add(newestOther.id);
  const remaining = new Set(listed.map((i) => i.id));
  for (const image of listed) {
    if (keep.has(image.id) || image.refs.some((r) => keep.has(r))) continue;
    let removed = 0;
    const targets = removalTargets(image);
    for (const ref of targets) {
      const o = await engine.removeImage(ref, opts);
      // An image still used by a container the engine keeps (stopped by hand...) stays: best effort.
      if (o.status === "completed" && o.exitCode === 0) {
        rec.log("retire", `removed old image ${ref}`);
        removed++;
      }
    }
    if (targets.length > 0 && removed === targets.length) remaining.delete(image.id);
  }
  // The ledger keeps what is still there (a removal that failed is tried again by the next prune).
  await ledger.forget(plan.applicationId, remaining);
}

/** The containers of the application before this deployment (the first is reported). */
export async function currentContainers(
  engine: ContainerEngine,
  applicationId: string,
  opts: CallOptions,
): Promise<string[]> {
  const o = await engine.containersByLabel(APPLICATION_LABEL, applicationId, opts);
  return o.status === "completed" && o.exitCode === 0 ? lines(o.stdout) : [];
}

const lines = (text: string) =>
  text
    .split("\n")
    .map((s) => s.trim())
    .filter(Boolean);

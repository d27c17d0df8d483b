// The retire step, after the result went out: the old containers keep serving
// requests that were in flight for the drain period, then every container
// labelled with the application except the new one is stopped and removed.
// The previous image stays (a rollback needs no rebuild); older images the
// pipeline built for the application are removed, best effort.
import { setTimeout as delay } from "node:timers/promises";
import type { CallOptions, ContainerEngine } from "../engine/engine.js";
import { outputOf } from "./context.js";
import { APPLICATION_LABEL } from "./naming.js";
import type { StepRecorder } from "./recorder.js";

/** Bounds each engine call; retire runs past the job's deadline by design. */
const CALL: CallOptions = { deadlineSeconds: 60 };
const STOP_GRACE_SECONDS = 10;

export async function retireOld(
  engine: ContainerEngine,
  rec: StepRecorder,
  applicationId: string,
  keep: string,
  keepImage: string,
  drainSeconds: number,
  secrets: string[],
): Promise<void> {
  const opts = { ...CALL, secrets };
  if (drainSeconds > 0) {
    rec.log("retire", `draining for ${drainSeconds} s`);
    await delay(drainSeconds * 1000);
  }
  const listed = await engine.containersByLabel(APPLICATION_LABEL, applicationId, opts);
  if (listed.status !== "completed" || listed.exitCode !== 0) {
    rec.fail("retire", `cannot list the application's containers: ${outputOf(listed) || listed.error}`);
    return;
  }
  const old = listed.stdout
    .split("\n")
    .map((s) => s.trim())
    .filter((n) => n && n !== keep);
  if (old.length === 0) {
    rec.succeed("retire", "no old container to retire");
    return;
  }
  const failures: string[] = [];
  for (const name of old) {
    await engine.stop(name, STOP_GRACE_SECONDS, opts);
    const rm = await engine.remove(name, opts);
    if (rm.status === "completed" && rm.exitCode === 0) rec.log("retire", `removed ${name}`);
    else failures.push(`${name}: ${outputOf(rm).trim() || rm.error}`);
  }
  if (failures.length > 0) {
    rec.fail("retire", `could not remove ${failures.join("; ")}`);
    return;
  }
  rec.log("retire", `retired ${old.join(", ")}`);
  await pruneImages(engine, rec, applicationId, keepImage, opts);
  rec.succeed("retire");
}

/** "localhost/relayctl/x:1" (podman) and "relayctl/x:1" name one image. */
const bare = (ref: string) => ref.replace(/^(localhost|docker\.io)\//, "");

/** Removes the application's built images but the new one and the newest other (the rollback). */
async function pruneImages(
  engine: ContainerEngine,
  rec: StepRecorder,
  applicationId: string,
  keepImage: string,
  opts: CallOptions,
): Promise<void> {
  const listed = await engine.imagesByLabel(APPLICATION_LABEL, applicationId, opts);
  if (listed.status !== "completed" || listed.exitCode !== 0) return;
  const others = listed.stdout
    .split("\n")
    .map((s) => s.trim())
    .filter((ref) => ref && !ref.includes("<none>") && bare(ref) !== bare(keepImage));
  for (const ref of others.slice(1)) {
    const o = await engine.removeImage(ref, opts);
    // An image still used by a container the engine keeps (stopped by hand...) stays: best effort.
    if (o.status === "completed" && o.exitCode === 0) rec.log("retire", `removed old image ${ref}`);
  }
}

/** The running containers of the application before this deployment (the first is reported). */
export async function currentContainers(
  engine: ContainerEngine,
  applicationId: string,
  opts: CallOptions,
): Promise<string[]> {
  const o = await engine.containersByLabel(APPLICATION_LABEL, applicationId, opts);
  return o.status === "completed" && o.exitCode === 0
    ? o.stdout
        .split("\n")
        .map((s) => s.trim())
        .filter(Boolean)
    : [];
}

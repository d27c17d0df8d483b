// The retire step, after the result went out: the old containers keep serving
// requests that were in flight for the drain period, then every container
// labelled with the application except the new one is stopped and removed.
// Their images stay (a rollback needs no rebuild).
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
  if (failures.length > 0) rec.fail("retire", `could not remove ${failures.join("; ")}`);
  else rec.succeed("retire", `retired ${old.join(", ")}`);
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

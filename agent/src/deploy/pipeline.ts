// One deployment, start to end (DESIGN.md "Deployments"): fetch → build →
// start → health_check → switch, then the result goes out (COMPLETED: the new
// version serves) and the retire step begins; its work (drain, stop, remove)
// is handed back as a RetirePlan that deployer.ts runs outside the
// application's turn, so the next deployment does not wait for it. Any
// failure, or the job's deadline, stops the pipeline: the CLI child running
// is killed, the new container is removed, the old one keeps serving (the
// route only moves at the switch, and nothing can fail after it). Results:
// FAILED (exit 1, "<step>: <reason>") or TIMEOUT (exit -1, "deadline passed
// during <step>"), with failed_step in the DeployReport.
import type { CommitInfo, DeployJob, DeployReport, JobProgress, JobResult } from "@relayctl/proto";
import { validApplicationId } from "@relayctl/reverse-proxy-sync";
import type { ContainerEngine } from "../engine/engine.js";
import { type DeployContext, type DeploySettings, StepError, callOptions } from "./context.js";
import { type FetchedSource, fetchSource, removeWorkDir, workDir } from "./git-fetch.js";
import { healthCheck } from "./health-check.js";
import type { ImageLedger } from "./image-ledger.js";
import { type FoundImage, buildImage, findBuilt, imageIdOfRef } from "./image-step.js";
import { inFlightContainers as inFlight } from "./in-flight.js";
import { containerName, namingProblem } from "./naming.js";
import { type StepName, StepRecorder } from "./recorder.js";
import { completed, ended, summary } from "./result.js";
import { jobSecrets } from "./secrets.js";
import { type RetirePlan, currentContainers, stamp } from "./retire.js";
import { startContainer } from "./start-step.js";
import { type SwitchTarget, switchRoute } from "./switch-step.js";

/** When a job carries no deadline (it always should). */
const DEFAULT_DEADLINE_MS = 60_000;
/** Bounds the removal of the new container after a failure (it may run past the deadline). */
const CLEANUP_SECONDS = 30;

export interface PipelineDeps {
  engine: ContainerEngine;
  /** Set when no container engine works: the first step fails with it, nothing runs. */
  engineProblem?: string;
  settings: DeploySettings;
  ledger: ImageLedger;
  target: SwitchTarget;
  emit: (progress: JobProgress) => void;
  /** Bytes of log kept per step. @default 1 MiB */
  logCapBytes?: number;
}

export interface State {
  commit?: CommitInfo;
  image: string;
  /** The image's engine id (`sha256:...`), known after the build step. */
  imageId: string;
  /** The image was built by an earlier deployment (same commit and build): a failure keeps it. */
  reused: boolean;
  name: string;
  hostPort: number;
  upstream: string;
  previous: string[];
  /** The start step began: a container of this name may exist and must go on failure. */
  started: boolean;
  /** The running step's work: cut by the deadline, it is awaited (its child killed) before cleanup. */
  inflight: Promise<unknown>;
}

/**
 * Runs the deployment up to its result; `onResult` is called exactly once (right
 * after the switch, or at the failure). Resolves then, with the retire still to
 * do after a switch (its step has begun), undefined after a failure. `rec` is
 * the deployment's record when the caller began it (a queue wait logged).
 */
export async function runDeployment(
  operationId: string,
  job: DeployJob,
  deps: PipelineDeps,
  onResult: (result: JobResult) => void,
  rec = new StepRecorder(operationId, jobSecrets(job), deps.emit, deps.logCapBytes),
): Promise<RetirePlan | undefined> {
  const startedAt = Date.now();
  const secrets = jobSecrets(job);
  const deadlineMs = Number(job.deadlineUnixMs) || startedAt + DEFAULT_DEADLINE_MS;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), Math.max(0, deadlineMs - Date.now()));
  const ctx: DeployContext = {
    job,
    engine: deps.engine,
    rec,
    signal: abort.signal,
    deadlineMs,
    secrets,
    settings: deps.settings,
    ledger: deps.ledger,
  };
  const state: State = {
    image: "",
    imageId: "",
    reused: false,
    name: "",
    hostPort: 0,
    upstream: "",
    previous: [],
    started: false,
    inflight: Promise.resolve(),
  };
  const report = (failedStep: string): DeployReport => ({
    deploymentId: job.deploymentId,
    commit: state.commit,
    image: state.image,
    containerName: state.name,
    hostPort: state.hostPort,
    upstream: state.upstream,
    proxy: deps.target.proxy.kind,
    steps: rec.snapshot(),
    failedStep,
    previousContainerName: state.previous[0] ?? "",
    imageId: state.imageId,
  });
  try {
    await steps(ctx, deps, state);
  } catch (err) {
    clearTimeout(timer);
    const step = rec.current ?? (rec.steps.at(-1)?.name as StepName | undefined) ?? "fetch";
    const timedOut = abort.signal.aborted;
    const reason = timedOut ? `deadline passed during ${step}` : `${step}: ${message(err)}`;
    // The step cut by the deadline ends first (its child is being killed), so nothing it logs follows the failure.
    await state.inflight;
    const removal = state.started
      ? await removeNew(ctx, state.name).finally(() => inFlight.delete(state.name))
      : "";
    const image = await removeFailedImage(ctx, state);
    rec.fail(step, [timedOut ? "deadline passed" : message(err), removal, image].filter(Boolean).join("\n"));
    onResult(ended(operationId, timedOut, rec.scrub(reason), report(step), startedAt));
    return undefined;
  }
  // Switched: the live container from here on, brought back after a crash like any other.
  inFlight.delete(state.name);
  clearTimeout(timer);
  const old = state.previous.filter((n) => n !== state.name);
  rec.begin(
    "retire",
    old.length > 0
      ? `${stamp()} old: ${old.join(", ")}; retired in the background after a ${deps.settings.drainSeconds} s drain (the next deployment does not wait for it)`
      : "",
  );
  onResult(completed(operationId, rec.scrub(summary(job, state, deps)), report(""), startedAt));
  return {
    applicationId: job.applicationId,
    deploymentId: job.deploymentId,
    keep: state.name,
    keepImage: state.image,
    keepImageId: state.imageId,
    keepImages: job.keepImages,
    old,
    drainSeconds: deps.settings.drainSeconds,
    secrets,
  };
}

async function steps(ctx: DeployContext, deps: PipelineDeps, state: State): Promise<void> {
  const { job, rec } = ctx;
  if (deps.engineProblem !== undefined) {
    // Fail before the fetch: a clone that no engine can build is only time lost.
    const problem = deps.engineProblem;
    await step(ctx, state, job.source === undefined ? "build" : "fetch", async () => {
      throw new StepError(problem);
    });
  }
  // The application's containers before this deployment's start, asked beside the fetch
  // and build instead of before the start: in the application's turn nothing but this
  // deployment adds one (retires only remove, and removeOld asks again), so the answer
  // now holds every container the start step would have found.
  const previous = validApplicationId(job.applicationId)
    ? currentContainers(ctx.engine, job.applicationId, callOptions(ctx))
    : Promise.resolve([]);
  const work = await workDir();
  // The export is removed beside the start, health check and switch, not before them (a large
  // tree takes a while to delete), and is gone before the pipeline ends either way.
  let removal: Promise<void> = Promise.resolve();
  try {
    let source: FetchedSource | undefined;
    let found: Promise<FoundImage | undefined> | undefined;
    const src = job.source;
    if (job.build?.$case === "release")
      rec.skip("fetch", `rollback to release ${job.build.release.deploymentId}: nothing to fetch`);
    else if (src === undefined) rec.skip("fetch", "no git repository: the image is pulled as it is");
    else {
      const fetched = await step(ctx, state, "fetch", () =>
        preflight(job).then(() =>
          fetchSource(ctx, src, work, (sha) => {
            found = findBuilt(ctx, sha);
          }),
        ),
      );
      source = fetched;
      state.commit = fetched.commit;
      rec.succeed("fetch", `commit ${fetched.commit.sha} ${fetched.commit.message}`, fetched.commit);
    }
    state.image = await step(ctx, state, "build", async () => {
      if (src === undefined) await preflight(job);
      const built = await buildImage(ctx, source, found);
      state.reused = built.reusedFrom !== undefined;
      state.imageId = built.imageId ?? (await imageIdOfRef(ctx, built.image));
      return built.image;
    });
    // Off the path: the ledger orders the application's images by their last run (retire.ts).
    void ctx.ledger.used(job.applicationId, state.imageId);
    const how = state.reused ? "reused" : "image";
    rec.succeed("build", `${how} ${state.image} (${state.imageId.slice(0, 19)})`);
  } finally {
    removal = removeWorkDir(work).catch(() => undefined);
  }
  try {
    await afterBuild(ctx, deps, state, previous);
  } finally {
    await removal;
  }
}

/** start → health_check → switch, with the list of the containers it replaces (asked at the start of steps()). */
async function afterBuild(ctx: DeployContext, deps: PipelineDeps, state: State, previous: Promise<string[]>) {
  const { job, rec } = ctx;
  state.name = containerName(job.containerBaseName, job.deploymentId);
  state.hostPort = await step(ctx, state, "start", async () => {
    state.previous = await previous;
    state.started = true;
    inFlight.add(state.name);
    return startContainer(ctx, state.name, state.image);
  });
  rec.succeed("start", `container ${state.name} on 127.0.0.1:${state.hostPort}`);
  await step(ctx, state, "health_check", () => healthCheck(ctx, state.name, state.hostPort));
  rec.succeed("health_check");
  state.upstream = await step(ctx, state, "switch", () =>
    switchRoute(ctx, deps.target, { name: state.name, hostPort: state.hostPort, image: state.image }),
  );
  rec.succeed("switch");
}

/** Begins the step and runs it until it ends or the deadline passes, whichever is first. */
async function step<T>(ctx: DeployContext, state: State, name: StepName, run: () => Promise<T>): Promise<T> {
  ctx.rec.begin(name);
  const signal = ctx.signal;
  if (signal.aborted) throw new StepError("deadline passed");
  let onAbort = () => {};
  const deadline = new Promise<never>((_, reject) => {
    onAbort = () => reject(new StepError("deadline passed"));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const work = run();
    state.inflight = work.catch(() => undefined);
    return await Promise.race([work, deadline]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** What the wire must not be trusted with, checked before the first step does any work. */
async function preflight(job: DeployJob): Promise<void> {
  if (!validApplicationId(job.applicationId)) throw new StepError("invalid application id");
  const problem = namingProblem(job.containerBaseName, job.deploymentId);
  if (problem !== undefined) throw new StepError(problem);
}

/**
 * A failed deployment's built image goes with its container, unless a release
 * still needs it (the same commit built before gives the same image) or it is
 * not one the pipeline built (a pulled image, a rollback's, a reused one). A line for the log.
 */
async function removeFailedImage(ctx: DeployContext, state: State): Promise<string> {
  if (ctx.job.build?.$case !== "dockerfile" || state.imageId === "" || state.reused) return "";
  if (ctx.job.keepImages.includes(state.imageId) || ctx.job.keepImages.includes(state.image)) return "";
  // By its tag: an image of the same id under another tag (the same files built from another commit) stays.
  const o = await ctx.engine.removeImage(state.image, {
    deadlineSeconds: CLEANUP_SECONDS,
    secrets: ctx.secrets,
  });
  // Refused when a container still uses it (a release the control plane did not list): it stays.
  return o.status === "completed" && o.exitCode === 0 ? `removed the new image ${state.image}` : "";
}

/** Removes the new container; returns a line for the failed step's log. */
async function removeNew(ctx: DeployContext, name: string): Promise<string> {
  const o = await ctx.engine.remove(name, { deadlineSeconds: CLEANUP_SECONDS, secrets: ctx.secrets });
  if (o.status === "completed" && o.exitCode === 0) return `removed the new container ${name}`;
  // `rm -f` of a container the engine never created says so: nothing is left behind then either.
  return `removing the new container ${name}: ${(o.stderr.trim() || o.error) ?? ""}`.trim();
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

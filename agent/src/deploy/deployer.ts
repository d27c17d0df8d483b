// The agent's deployments: one SerialQueues turn per application, held from
// the start of a deployment up to its result (after the switch, or at the
// failure), in the order received; the engine checked and chosen at the start
// of each turn, and progress handed to the dispatcher's emit. run() resolves
// with the JobResult as soon as the pipeline has one. The retire goes on in
// the background, outside the turn: the next deployment of the application
// starts while the old container drains (issue 29: back-to-back deploys waited
// ~5 s for it). Retires of one application run their removals one at a time
// (retire.ts removes only what its deployment listed); the image prune takes a
// turn of its own, so it never runs between another deployment's build and start.
// A deployment that waits for its turn says so in its log ("queue" step), with times.
// The engine's run, remove and inspect go through its API socket when it answers
// one (engine/api-engine.ts), the CLI otherwise. The deployer owns the agent's
// image ledger (image-ledger.ts, <stateDir>/images.json): what it built, for whom.
import type { DeployJob, JobProgress, JobResult } from "@relayctl/proto";
import { withEngineApi } from "../engine/api-engine.js";
import { EngineApi, engineSocketPath } from "../engine/engine-api.js";
import type { ContainerEngine } from "../engine/engine.js";
import { failedResult } from "../jobs/exec.js";
import { join } from "node:path";
import type { DeploySettings } from "./context.js";
import { ImageLedger } from "./image-ledger.js";
import { runDeployment } from "./pipeline.js";
import { SerialQueues } from "./queue.js";
import { StepRecorder } from "./recorder.js";
import { type RetirePlan, drain, pruneImages, removeOld, stamp } from "./retire.js";
import { jobSecrets } from "./secrets.js";
import type { SwitchTarget } from "./switch-step.js";

export interface DeployerOptions {
  settings: DeploySettings;
  target: SwitchTarget;
  engine: () => ContainerEngine;
  /**
   * Why no deployment can run now (no working container engine), asked at the
   * start of each deployment's turn: it then fails at its first step with this
   * reason, before any git fetch. @default always usable
   */
  engineProblem?: () => Promise<string | undefined>;
  emit: (progress: JobProgress) => void;
  logCapBytes?: number;
  /** Told about a pipeline that threw (a bug): its job still gets a result. */
  onError?: (err: unknown) => void;
}

export class Deployer {
  /** Deployments up to their result, and image prunes: one at a time per application. */
  readonly #turns = new SerialQueues();
  /** Retires' container removals: one at a time per application. */
  readonly #removals = new SerialQueues();
  /** What last took each application's turn and has not ended: named in a waiting line. */
  readonly #holder = new Map<string, string>();
  readonly #retiring = new Set<Promise<void>>();
  /** One API client per engine socket, its connections kept open between deployments. */
  readonly #apis = new Map<string, EngineApi>();
  #ledger: Promise<ImageLedger> | undefined;

  constructor(readonly options: DeployerOptions) {}

  /** The images this agent built (read once, then kept in memory). */
  images(): Promise<ImageLedger> {
    this.#ledger ??= ImageLedger.open(join(this.options.settings.stateDir, "images.json"));
    return this.#ledger;
  }

  /** Closes the connections kept to engine sockets (a deployer that runs no more). */
  close(): void {
    for (const api of this.#apis.values()) api.close();
    this.#apis.clear();
  }

  /** The engine with its API socket where the CLI would find one (DOCKER_HOST / CONTAINER_HOST, or its default). */
  #engine(): ContainerEngine {
    const engine = this.options.engine();
    const path = engineSocketPath(engine.name);
    if (path === undefined) return engine;
    const key = `${engine.name} ${path}`;
    let api = this.#apis.get(key);
    if (api === undefined) {
      api = new EngineApi(engine.name, path);
      this.#apis.set(key, api);
    }
    return withEngineApi(engine, api);
  }

  run(operationId: string, job: DeployJob): Promise<JobResult> {
    return new Promise<JobResult>((resolve) => {
      let sent = false;
      const onResult = (r: JobResult) => {
        sent = true;
        resolve(r);
      };
      const o = this.options;
      const rec = new StepRecorder(operationId, jobSecrets(job), o.emit, o.logCapBytes);
      let engine: ContainerEngine | undefined;
      const deployment = async () => {
        const [engineProblem, ledger] = await Promise.all([o.engineProblem?.(), this.images()]);
        engine = this.#engine();
        const deps = {
          engine,
          engineProblem,
          ledger,
          settings: o.settings,
          target: o.target,
          emit: o.emit,
          logCapBytes: o.logCapBytes,
        };
        return runDeployment(operationId, job, deps, onResult, rec);
      };
      const where = { rec, step: "queue" as const, begin: true };
      void this.#turn(job.applicationId, `deployment ${job.deploymentId}`, where, deployment).then(
        (plan) => {
          if (plan && engine) this.#background(this.#retire(engine, rec, plan));
        },
        (err) => {
          o.onError?.(err);
          if (!sent) resolve(failedResult(operationId, `agent error: ${(err as Error).message}`));
        },
      );
    });
  }

  /**
   * Runs `task` in the application's turn, after every deployment received before
   * it (an application's cleanup: a deployment that ends after it would leave a
   * container and a route behind).
   */
  exclusive<T>(applicationId: string, label: string, task: () => Promise<T>): Promise<T> {
    this.#holder.set(applicationId, label);
    const run = this.#turns.run(applicationId, task);
    const release = () => {
      if (this.#holder.get(applicationId) === label) this.#holder.delete(applicationId);
    };
    void run.then(release, release);
    return run;
  }

  /** Resolves when every deployment taken so far has ended, retire included. */
  async idle(): Promise<void> {
    while (this.#retiring.size > 0) await Promise.all([...this.#retiring]);
    await this.#turns.idle();
    await (await this.#ledger)?.flushed().catch(() => undefined);
  }

  /**
   * Runs `task` in the application's turn. When the turn is held, a line says by
   * what and since when, and one more when the turn comes; `where.begin` opens
   * the step for them (a deployment's "queue"), else they go to a running step.
   */
  #turn<T>(
    applicationId: string,
    label: string,
    where: { rec: StepRecorder; step: "queue" | "retire"; begin: boolean },
    task: () => Promise<T>,
  ): Promise<T> {
    const ahead = this.#holder.get(applicationId);
    this.#holder.set(applicationId, label);
    const since = Date.now();
    if (ahead !== undefined) {
      const line = `${stamp(since)} waiting for ${ahead} to finish`;
      if (where.begin) where.rec.begin(where.step, line);
      else where.rec.log(where.step, line);
    }
    const run = this.#turns.run(applicationId, async () => {
      if (ahead !== undefined) {
        const line = `${stamp()} ${ahead} finished; waited ${((Date.now() - since) / 1000).toFixed(1)} s`;
        if (where.begin) where.rec.succeed(where.step, line);
        else where.rec.log(where.step, line);
      }
      return task();
    });
    const release = () => {
      if (this.#holder.get(applicationId) === label) this.#holder.delete(applicationId);
    };
    void run.then(release, release);
    return run;
  }

  /**
   * Drain; then, once no deployment of the application is before its switch, the removal (in
   * order with the application's other retires); then the image prune in a turn.
   */
  async #retire(engine: ContainerEngine, rec: StepRecorder, plan: RetirePlan): Promise<void> {
    try {
      await drain(rec, plan);
      // A deployment that began during the drain goes first: stop and rm contend with its build
      // and start for podman's locks and the CPU. The removal itself holds no turn: a deployment
      // that comes while it runs does not wait for it.
      await this.#turns.run(plan.applicationId, async () => {});
      const removed = await this.#removals.run(plan.applicationId, () => removeOld(engine, rec, plan));
      if (!removed) return;
      const where = { rec, step: "retire" as const, begin: false };
      const label = `the image cleanup of deployment ${plan.deploymentId}`;
      const ledger = await this.images();
      await this.#turn(plan.applicationId, label, where, () => pruneImages(engine, ledger, rec, plan));
      rec.succeed("retire", `${stamp()} retired`);
    } catch (err) {
      rec.fail("retire", `agent error: ${(err as Error).message}`);
    }
  }

  #background(work: Promise<void>): void {
    this.#retiring.add(work);
    void work.finally(() => this.#retiring.delete(work));
  }
}

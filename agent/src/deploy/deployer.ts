// The agent's deployments: one SerialQueues turn per application (deployments
// of one application in the order received; the turn lasts until the old
// container is retired), the engine checked and chosen at the start of each turn,
// and progress handed to the dispatcher's emit. run() resolves with the
// JobResult as soon as the pipeline has one (after the switch, or at the
// failure), while retire goes on in the background.
import type { DeployJob, JobProgress, JobResult } from "@relayctl/proto";
import type { ContainerEngine } from "../engine/engine.js";
import { failedResult } from "../jobs/exec.js";
import type { DeploySettings } from "./context.js";
import { runDeployment } from "./pipeline.js";
import { SerialQueues } from "./queue.js";
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
  readonly #queues = new SerialQueues();

  constructor(readonly options: DeployerOptions) {}

  run(operationId: string, job: DeployJob): Promise<JobResult> {
    return new Promise<JobResult>((resolve) => {
      let sent = false;
      const onResult = (r: JobResult) => {
        sent = true;
        resolve(r);
      };
      const o = this.options;
      const turn = async () => {
        const engineProblem = await o.engineProblem?.();
        const deps = {
          engine: o.engine(),
          engineProblem,
          settings: o.settings,
          target: o.target,
          emit: o.emit,
          logCapBytes: o.logCapBytes,
        };
        return runDeployment(operationId, job, deps, onResult);
      };
      void this.#queues.run(job.applicationId, turn).catch((err) => {
        o.onError?.(err);
        if (!sent) resolve(failedResult(operationId, `agent error: ${(err as Error).message}`));
      });
    });
  }

  /** Resolves when every deployment taken so far has ended, retire included. */
  idle(): Promise<void> {
    return this.#queues.idle();
  }
}

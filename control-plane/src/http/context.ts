// What api routes need from the process: config, database, bus, and the
// operations service that owns every operation's life.
import type { Knex } from "knex";
import type { JobBus } from "../bus/job-bus.js";
import type { Config } from "../config.js";
import type { DeployService } from "../deployments/service.js";
import type { RolloutService } from "../fleets/rollouts.js";
import type { ForgeIntegration } from "../forges/integration.js";
import type { GitHubIntegration } from "../github/integration.js";
import type { OperationService } from "../operations/service.js";

export interface ApiContext {
  config: Config;
  db: Knex;
  bus: JobBus;
  ops: OperationService;
  deploys: DeployService;
  /** Fleet rollouts (fleets/rollouts.ts); absent in processes built without them (unit tests). */
  rollouts?: RolloutService;
  /** The GitHub App integration; undefined when not configured. */
  github?: GitHubIntegration;
  /** GitLab and Gitea/Forgejo connections' webhooks and statuses; absent in unit tests' processes. */
  forges?: ForgeIntegration;
}

// What the GitHub integration needs from the process, built once at boot (serve.ts).
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { RolloutService } from "../fleets/rollouts.js";
import type { DeployService } from "../deployments/service.js";
import type { PreviewContext } from "../previews/service.js";
import type { GitHubApp } from "./app-client.js";

export interface GitHubContext {
  db: Knex;
  deploys: DeployService;
  app: GitHubApp;
  log: Logger;
  /** Deadline of a push deployment (RELAYCTL_GITHUB_DEPLOY_TIMEOUT_SECONDS). */
  deployTimeoutSeconds: number;
  /** Bounds of /webhooks/github before a body is verified (RELAYCTL_GITHUB_WEBHOOK_*). */
  webhook: { concurrentBodies: number; perIpPerMinute: number };
  /** RELAYCTL_PUBLIC_URL: links in commit statuses, the setup URL. */
  publicUrl: string | undefined;
  /** Previews of pull requests (previews/service.ts); absent: pull requests are ignored. */
  previews?: PreviewContext;
  /** The process's rollouts: a push to a fleet application starts one (serve.ts sets it). */
  rollouts?: RolloutService;
}

/**
 * A webhook payload: GitHub's JSON, read field by field with fallbacks (the
 * event types of @octokit/webhooks are ESM-only and describe more than we read).
 */
// biome-ignore lint/suspicious/noExplicitAny: see above
export type Payload = Record<string, any>;

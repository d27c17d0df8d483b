// What the GitLab/Gitea/Forgejo integration needs from the process, built once
// at boot (serve.ts). Its deploy deadline and webhook bounds are GitHub's
// settings (RELAYCTL_GITHUB_DEPLOY_TIMEOUT_SECONDS, RELAYCTL_GITHUB_WEBHOOK_*):
// one set of limits for every forge's pushes.
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { RolloutService } from "../fleets/rollouts.js";
import type { AppsUrl } from "../applications/app-url.js";
import type { DeployService } from "../deployments/service.js";

export interface ForgeContext {
  db: Knex;
  deploys: DeployService;
  log: Logger;
  /** RELAYCTL_MASTER_KEY: opens the connections' sealed tokens and secrets. */
  masterKey: Buffer | undefined;
  deployTimeoutSeconds: number;
  webhook: { concurrentBodies: number; perIpPerMinute: number };
  /** RELAYCTL_PUBLIC_URL: webhook URLs shown to owners, links in commit statuses. */
  publicUrl: string | undefined;
  /** RELAYCTL_APPS_URL: a preview's URL in its comment when it has no domain pattern. */
  appsUrl: AppsUrl | undefined;
  /** The process's rollouts: a push to a fleet application starts one (serve.ts sets it). */
  rollouts?: RolloutService;
}

/** A forge's JSON payload, read field by field with fallbacks. */
// biome-ignore lint/suspicious/noExplicitAny: payloads of three forges' versions, read defensively
export type Payload = Record<string, any>;

/** An application's forge link (migration 026). */
export interface ForgeLink {
  forge_connection_id?: string | null;
  forge_project?: string | null;
}

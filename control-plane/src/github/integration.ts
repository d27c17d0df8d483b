// The GitHub integration of one control-plane process: the App client, the
// context its handlers share and the background delivery processor. Built at
// boot when the App is configured (serve.ts); absent otherwise, said once here,
// and every GitHub endpoint then answers 503 RC_ERR_GITHUB_UNCONFIGURED (not
// logged per request: errors.ts SWITCHED_OFF); GET /api/github/app tells the
// dashboard, which shows owners how to configure it.
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { Config } from "../config.js";
import type { ApplicationRow } from "../applications/store.js";
import type { DeployService } from "../deployments/service.js";
import { RcError } from "../errors.js";
import type { RolloutService } from "../fleets/rollouts.js";
import { GitHubApp } from "./app-client.js";
import type { GitHubContext } from "./context.js";
import { cannotDeploy, reachableRepository } from "./installations.js";
import { DeliveryProcessor } from "./processor.js";

export interface GitHubIntegration {
  app: GitHubApp;
  ctx: GitHubContext;
  processor: DeliveryProcessor;
}

export async function startGitHub(
  config: Config,
  db: Knex,
  deploys: DeployService,
  rollouts: RolloutService | undefined,
  log: Logger,
): Promise<GitHubIntegration | undefined> {
  if (!config.github) {
    log.info(
      "GitHub App not configured: push-to-deploy and repository links are off (set RELAYCTL_GITHUB_APP_ID and the other RELAYCTL_GITHUB_ settings, docs/github-app.md)",
    );
    return undefined;
  }
  const app = await GitHubApp.create(config.github);
  const ctx: GitHubContext = {
    db,
    deploys,
    rollouts,
    app,
    log,
    deployTimeoutSeconds: config.githubDeployTimeoutSeconds,
    webhook: config.githubWebhook,
    publicUrl: config.publicUrl,
  };
  // Every deployment of a linked application (push or not) fetches with a token minted for it.
  deploys.useSourceCredentials((a) => installationCredential(ctx, a));
  const processor = new DeliveryProcessor(ctx);
  processor.start();
  return { app, ctx, processor };
}

async function installationCredential(ctx: GitHubContext, a: ApplicationRow) {
  if (a.github_repository_id === null || a.github_repository_id === undefined) return undefined;
  const repo = await reachableRepository(ctx.db, Number(a.github_repository_id));
  const blocked = cannotDeploy(repo, a.tenant_id);
  if (blocked) throw new RcError("RC_ERR_NOT_DEPLOYABLE", `cannot deploy: ${blocked}`);
  // Read access to this repository's contents and nothing else (least privilege),
  // minted for this deployment: it may fetch only once its turn comes.
  const token = await ctx.app.installationToken(
    Number(repo!.installation_id),
    Number(repo!.id),
    { contents: "read" },
    true,
  );
  return { username: "x-access-token", password: token };
}

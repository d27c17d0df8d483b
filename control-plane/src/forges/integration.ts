// The GitLab/Gitea/Forgejo integration of one control-plane process (api
// role): its context, the background processor, and the git credential of
// every deployment of a linked application: the connection's API token, opened
// for that job only and never stored in the application's repository settings
// (GitLab takes any user name with a token as the password, `oauth2` by
// convention; Gitea and Forgejo take a token as the password too).
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { ApplicationRow } from "../applications/store.js";
import type { Config } from "../config.js";
import type { DeployService } from "../deployments/service.js";
import { RcError } from "../errors.js";
import { apiToken, type ConnectionRow } from "./connections.js";
import type { ForgeContext, ForgeLink } from "./context.js";
import type { RolloutService } from "../fleets/rollouts.js";
import { ForgeProcessor, type ReviewHandler } from "./processor.js";

export interface ForgeIntegration {
  ctx: ForgeContext;
  processor: ForgeProcessor;
}

export function startForges(
  config: Config,
  db: Knex,
  deploys: DeployService,
  rollouts: RolloutService | undefined,
  log: Logger,
  review?: ReviewHandler,
): ForgeIntegration {
  const ctx: ForgeContext = {
    db,
    deploys,
    rollouts,
    log,
    masterKey: config.masterKey,
    deployTimeoutSeconds: config.githubDeployTimeoutSeconds,
    webhook: config.githubWebhook,
    publicUrl: config.publicUrl,
    appsUrl: config.appsUrl,
  };
  deploys.useSourceCredentials((a) => forgeCredential(ctx, a));
  const processor = new ForgeProcessor(ctx, review);
  processor.start();
  return { ctx, processor };
}

async function forgeCredential(ctx: ForgeContext, a: ApplicationRow & ForgeLink) {
  if (!a.forge_connection_id) return undefined;
  const c = await ctx.db("forge_connections").where({ id: a.forge_connection_id }).first<ConnectionRow>();
  if (!c || c.tenant_id !== a.tenant_id)
    throw new RcError(
      "RC_ERR_NOT_DEPLOYABLE",
      "cannot deploy: the application's forge connection was removed",
    );
  if (!ctx.masterKey) throw new RcError("RC_ERR_MASTER_KEY_UNSET");
  return { username: "oauth2", password: apiToken(ctx.masterKey, c) };
}

// A deploy or rollback of a fleet application (one with a placement) as the
// deploy routes start it (api/automation/deploy.ts, deployments/routes.ts): the
// placement resolved now, the key's server scope checked for every target (403
// for the whole rollout when any is outside it: a rollout never deploys part
// of a fleet silently), then RolloutService.start.
import type { ApplicationRow } from "../applications/store.js";
import type { Principal } from "../auth/principal.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import type { ServerRef } from "../servers/servers.js";
import { placementOf, resolvePlacement } from "./placement.js";
import type { RolloutRequest } from "./rollouts.js";
import { type StrategyInput, compileStrategy } from "./strategy.js";

/** The application's servers now, or null for an application on its server_id alone. */
export async function fleetTargets(
  ctx: ApiContext,
  principal: Principal,
  app: ApplicationRow,
): Promise<ServerRef[] | null> {
  const placement = placementOf(app.placement);
  if (!placement) return null;
  const targets = await resolvePlacement(ctx.db, app.tenant_id, placement);
  if (principal.servers.length > 0) {
    const outside = targets.filter((s) => !principal.servers.includes(s.id));
    if (outside.length > 0)
      throw new RcError(
        "RC_ERR_FORBIDDEN",
        `server(s) ${outside.map((s) => `'${s.name}'`).join(", ")} of the application's placement are outside this key's server scope`,
      );
  }
  return targets;
}

/** Starts the rollout; the deploy routes' 202 body with its rollout_id. */
export async function startRollout(
  ctx: ApiContext,
  app: ApplicationRow,
  targets: ServerRef[],
  o: {
    kind: RolloutRequest["kind"];
    base: RolloutRequest["base"];
    strategy?: StrategyInput;
    release?: string;
  },
) {
  if (!ctx.rollouts) throw new Error("rollouts are not available in this process");
  if (o.release !== undefined)
    throw new RcError(
      "RC_ERR_VALIDATION",
      "release: a fleet application is rolled back server by server to each one's previous release; name no release",
    );
  const appStrategy = app.rollout_strategy ? (JSON.parse(app.rollout_strategy) as StrategyInput) : null;
  const started = await ctx.rollouts.start({
    app,
    targets,
    kind: o.kind,
    base: o.base,
    strategy: compileStrategy(appStrategy, o.strategy),
  });
  return {
    operation_id: started.operationId,
    status: "running" as const,
    deployment_id: started.deploymentId,
    rollout_id: started.rolloutId,
  };
}

/** A strategy in the request of an application without a placement is a mistake, said so. */
export function noStrategy(strategy: StrategyInput | undefined): void {
  if (strategy !== undefined)
    throw new RcError("RC_ERR_VALIDATION", "strategy: only an application with a placement rolls out");
}

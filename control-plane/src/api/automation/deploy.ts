// POST /api/automation/v1/deploy — deploy an application (scope `deploy`).
// POST /api/automation/v1/rollback — start a kept release of it again (scope
// `deploy`; an operation of type `deploy` whose deployment's rollback_of names
// the release): nothing is fetched or built, the agent starts the release's
// image with the release's configuration, health-checks, switches and drains.
// `release` is a deployment id; absent, the release before the live one.
// Both always asynchronous: 202 {operation_id, status: "running", deployment_id}
// once the operation, its audit event and the deployment are recorded; the
// caller polls the operation (or follows the deployment's log). 404 for an
// unknown or another tenant's application (or release), 403 when its server is
// outside the key's scope, 409 for a rollback whose image is no longer kept
// (or with no release before the live one).
// A fleet application (one with a placement, docs/fleets.md) is deployed or
// rolled back as a rollout: 202 adds rollout_id, deployment_id is the first
// server's and the operation completes when the rollout does; 403 when any of
// its servers is outside the key's scope; 409 while a rollout of it runs.
import type { FastifyRequest } from "fastify";
import { z } from "zod";

import { getApplication } from "../../applications/store.js";
import { refSchema } from "../../applications/source.js";
import { type RollbackTarget, rollbackTarget } from "../../deployments/releases.js";
import { viaOf } from "../../mcp/marker.js";
import { deployStarted } from "../../http/answers.js";
import { DEPLOY_TIMEOUT, deployTimeoutSchema, rollbackBody } from "../../http/operation-bodies.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { envSchema, runContextSchema, runIdSchema, uuidSchema } from "../../http/schemas.js";
import { findServer } from "../../servers/servers.js";
import { fleetTargets, noStrategy, startRollout } from "../../fleets/deploy.js";
import { strategySchema } from "../../fleets/strategy.js";
import type { RolloutRequest } from "../../fleets/rollouts.js";

const bodySchema = z.strictObject({
  application_id: uuidSchema,
  commit_ref: refSchema.optional(),
  env_overrides: envSchema.optional(),
  timeout_seconds: deployTimeoutSchema.optional(),
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
  strategy: strategySchema.optional(),
});

/** What both routes' bodies share. */
interface Common {
  application_id: string;
  timeout_seconds?: number;
  run_id?: string;
  run_context?: Record<string, string>;
  /** A fleet's rollout: over the application's rollout_strategy. */
  strategy?: z.infer<typeof strategySchema>;
  release?: string;
}

export const deployRoutes = (ctx: ApiContext): RouteSpec[] => {
  /** Records the deployment (or rollback) with its caller, actor and audit; the 202 body. */
  const start = async (
    req: FastifyRequest,
    body: Common,
    what: {
      commitRef?: string;
      envOverrides: Record<string, string>;
      rollback?: (app: Parameters<typeof rollbackTarget>[1]) => Promise<RollbackTarget>;
    },
  ) => {
    const p = req.principal;
    const application = await getApplication(ctx.db, p.tenantId, body.application_id);
    const runId = body.run_id ?? null;
    const base: RolloutRequest["base"] = {
      tenantId: p.tenantId,
      commitRef: what.commitRef,
      envOverrides: what.envOverrides,
      timeoutSeconds: body.timeout_seconds ?? DEPLOY_TIMEOUT.default,
      runId,
      // A person's OAuth token comes from the relayctl CLI's device flow.
      trigger: p.user ? "cli" : "api",
      actor: p.user
        ? { type: "user", id: p.user.id, name: p.user.email }
        : { type: "automation_key", id: p.keyId, name: p.keyName },
      keyId: p.keyId,
      audit: {
        key_id: p.keyId,
        key_name: p.keyName,
        run_id: runId,
        ip: req.ip,
        run_context: body.run_context ?? null,
        ...viaOf(req),
      },
    };
    const fleet = await fleetTargets(ctx, p, application);
    if (fleet) {
      const kind = what.rollback ? ("rollback" as const) : ("deploy" as const);
      return startRollout(ctx, application, fleet, {
        kind,
        base,
        strategy: body.strategy,
        release: body.release,
      });
    }
    noStrategy(body.strategy);
    const server = await findServer(ctx.db, p, application.server_id);
    const rollback = await what.rollback?.(application);
    const d = await ctx.deploys.request({ ...base, app: application, server, rollback });
    return { operation_id: d.operationId, status: "running" as const, deployment_id: d.deploymentId };
  };

  return [
    route({
      method: "POST",
      url: `${AUTOMATION_API}/deploy`,
      access: { credentials: AUTOMATION, scope: "deploy", role: "deployer" },
      tag: "automation",
      schema: { body: bodySchema },
      responses: { 202: deployStarted },
      handler: async (req, reply) => {
        const body = req.body;
        const what = { commitRef: body.commit_ref, envOverrides: body.env_overrides ?? {} };
        return reply.status(202).send(await start(req, body, what));
      },
    }),
    route({
      method: "POST",
      url: `${AUTOMATION_API}/rollback`,
      access: { credentials: AUTOMATION, scope: "deploy", role: "deployer" },
      tag: "automation",
      summary: "Roll an application back to a kept release (no build)",
      schema: { body: rollbackBody },
      responses: { 202: deployStarted },
      handler: async (req, reply) => {
        const body = req.body;
        const rollback = (app: Parameters<typeof rollbackTarget>[1]) =>
          rollbackTarget(ctx.db, app, body.release);
        return reply.status(202).send(await start(req, body, { envOverrides: {}, rollback }));
      },
    }),
  ];
};

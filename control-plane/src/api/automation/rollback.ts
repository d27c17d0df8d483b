// POST /api/automation/v1/rollback — start a kept release of an application
// again (scope `deploy`; an operation of type `deploy`, with a deployment whose
// rollback_of names the release). Nothing is fetched or built: the agent starts
// the release's image beside the live container with the release's
// configuration, health-checks it, switches and drains like any deployment.
// `release` is a deployment id; absent, the release before the live one.
// 404 for an unknown application or release, 409 when the release's image is no
// longer kept on the server (or there is no release before the live one), 403
// when the application's server is outside the key's scope.
import { getApplication } from "../../applications/store.js";
import { rollbackTarget } from "../../deployments/releases.js";
import { deployStarted } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { DEPLOY_TIMEOUT, rollbackBody } from "../../http/operation-bodies.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { viaOf } from "../../mcp/marker.js";
import { findServer } from "../../servers/servers.js";

export const rollbackRoutes = (ctx: ApiContext): RouteSpec[] => [
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
      const p = req.principal;
      const application = await getApplication(ctx.db, p.tenantId, body.application_id);
      const server = await findServer(ctx.db, p, application.server_id);
      const target = await rollbackTarget(ctx.db, application, body.release);
      const runId = body.run_id ?? null;
      const d = await ctx.deploys.request({
        tenantId: p.tenantId,
        app: application,
        server,
        commitRef: undefined,
        envOverrides: {},
        timeoutSeconds: body.timeout_seconds ?? DEPLOY_TIMEOUT.default,
        runId,
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
        rollback: target,
      });
      return reply
        .status(202)
        .send({ operation_id: d.operationId, status: "running", deployment_id: d.deploymentId });
    },
  }),
];

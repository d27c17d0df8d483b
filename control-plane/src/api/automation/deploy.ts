// POST /api/automation/v1/deploy — deploy an application (scope `deploy`).
// Always asynchronous: 202 {operation_id, status: "running", deployment_id} once
// the operation, its audit event and the deployment are recorded; the caller
// polls the operation (or follows the deployment's log). 404 for an unknown or
// another tenant's application, 403 when its server is outside the key's scope.
import { z } from "zod";

import { getApplication } from "../../applications/store.js";
import { refSchema } from "../../applications/source.js";
import { viaOf } from "../../mcp/marker.js";
import { deployStarted } from "../../http/answers.js";
import { DEPLOY_TIMEOUT, deployTimeoutSchema } from "../../http/operation-bodies.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { envSchema, runContextSchema, runIdSchema, uuidSchema } from "../../http/schemas.js";
import { findServer } from "../../servers/servers.js";

const bodySchema = z.strictObject({
  application_id: uuidSchema,
  commit_ref: refSchema.optional(),
  env_overrides: envSchema.optional(),
  timeout_seconds: deployTimeoutSchema.optional(),
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
});

export const deployRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/deploy`,
    access: { credentials: AUTOMATION, scope: "deploy", role: "deployer" },
    tag: "automation",
    schema: { body: bodySchema },
    responses: { 202: deployStarted },
    handler: async (req, reply) => {
      const body = req.body;
      const p = req.principal;
      const application = await getApplication(ctx.db, p.tenantId, body.application_id);
      const server = await findServer(ctx.db, p, application.server_id);
      const runId = body.run_id ?? null;
      const d = await ctx.deploys.request({
        tenantId: p.tenantId,
        app: application,
        server,
        commitRef: body.commit_ref,
        envOverrides: body.env_overrides ?? {},
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
      });
      return reply
        .status(202)
        .send({ operation_id: d.operationId, status: "running", deployment_id: d.deploymentId });
    },
  }),
];

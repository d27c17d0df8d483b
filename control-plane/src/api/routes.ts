// Every route of the api, in one list: each module declares its routes
// (http/route.ts) and this is where they are gathered; register-routes.ts
// derives admission, role and scope checks, rate limits, validation and the
// OpenAPI description from each declaration. To find who may call a route,
// open its declaration: nothing about it is kept anywhere else.
import type { FastifyInstance } from "fastify";
import { usersRoutes } from "../accounts/users-api.js";
import { webRoutes } from "../accounts/web-routes.js";
import { applicationsRoutes } from "../applications/applications-api.js";
import { logsRoutes } from "../applications/logs-api.js";
import { dashboardRoutes } from "../dashboard/static.js";
import { deploymentsRoutes } from "../deployments/routes.js";
import { previewRoutes } from "../previews/routes.js";
import { externalDeployRoutes } from "../external-deploy/routes.js";
import { forgeRoutes } from "../forges/routes.js";
import { forgeWebhookRoutes } from "../forges/webhook-route.js";
import { githubRoutes, githubSetupRoutes } from "../github/routes.js";
import { webhookRoutes } from "../github/webhook-route.js";
import type { ApiContext } from "../http/context.js";
import type { RouteSpec } from "../http/route.js";
import { cliInstallRoutes } from "../install/cli-routes.js";
import { installRoutes } from "../install/routes.js";
import { mcpRoutes } from "../mcp/routes.js";
import { authorizePageRoutes } from "../oauth/authorize-page.js";
import { devicePageRoutes } from "../oauth/device-page.js";
import { oauthRoutes } from "../oauth/routes.js";
import { healthRoutes } from "../observability/health.js";
import { metricsRoutes } from "../observability/http-metrics.js";
import { openApiRoutes } from "../observability/openapi.js";
import { providerBindingRoutes } from "../reboot/bindings-api.js";
import { registryCredentialsRoutes } from "../registry/credentials-api.js";
import { serverRoutes } from "../servers/routes.js";
import { fleetRoutes } from "../fleets/routes.js";
import { enrollRoutes } from "./agent-enroll.js";
import { automationRoutes } from "./automation/index.js";
import { activityRoutes } from "./management/activity.js";
import { apiKeysRoutes } from "./management/api-keys.js";
import { auditVerifyRoutes } from "./management/audit-verify.js";
import { auditRoutes } from "./management/audit.js";
import { automationKeysRoutes } from "./management/automation-keys.js";
import { joinTokensRoutes } from "./management/join-tokens.js";

export function apiRoutes(
  ctx: ApiContext,
  gatewayUrls: () => string[],
  app: FastifyInstance,
  /** Aborted when the api closes: ends the live logs being followed. */
  closing: AbortSignal,
): RouteSpec[] {
  const busName = ctx.config.bus === "nats" ? "nats" : "job bus";
  return [
    ...healthRoutes({ db: ctx.db, bus: ctx.bus, busName }),
    ...metricsRoutes(),
    ...openApiRoutes(app),
    // The Automation API (/api/automation/v1): CI pipelines' operations.
    ...automationRoutes(ctx),
    // The management API (/api): keys, audit, applications, deployments, servers.
    ...automationKeysRoutes(ctx),
    ...auditRoutes(ctx),
    ...auditVerifyRoutes(ctx),
    ...providerBindingRoutes(ctx),
    ...applicationsRoutes(ctx),
    ...logsRoutes(ctx, closing),
    ...registryCredentialsRoutes(ctx),
    ...deploymentsRoutes(ctx, closing),
    ...previewRoutes(ctx),
    ...githubRoutes(ctx),
    ...forgeRoutes(ctx),
    ...joinTokensRoutes(ctx),
    ...serverRoutes(ctx),
    ...fleetRoutes(ctx),
    ...apiKeysRoutes(ctx),
    ...activityRoutes(ctx),
    // External deploy: route sync for pipelines that start their own containers.
    ...externalDeployRoutes(ctx),
    // Agents and the CLI: enrollment and the installers.
    ...enrollRoutes(ctx, gatewayUrls),
    ...installRoutes(ctx),
    ...cliInstallRoutes(ctx),
    // People: sign-in pages, OAuth (device flow, authorization code grant) and its pages, users.
    ...webRoutes(ctx),
    ...oauthRoutes(ctx),
    ...devicePageRoutes(ctx),
    ...authorizePageRoutes(ctx),
    ...usersRoutes(ctx),
    // AI coding tools: the MCP endpoint, a client of the API above (through `app`).
    ...mcpRoutes(ctx, app),
    // The GitHub App: webhooks and the installation's setup page.
    ...webhookRoutes(ctx.github),
    ...githubSetupRoutes(ctx),
    // GitLab, Gitea and Forgejo: their webhooks, to the connection each names.
    ...(ctx.forges ? forgeWebhookRoutes(ctx.forges.ctx, () => ctx.forges?.processor.nudge()) : []),
    // The web dashboard's pages (web/dist) under /app/.
    ...dashboardRoutes(ctx),
  ];
}

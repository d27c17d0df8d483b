// The Automation API (/api/automation/v1): exec, operations, restart, reboot,
// registry login/logout, deploy and rollback, and the servers in scope by name. Each route declares the credentials it takes
// (an automation key or a person's access token) and the operation scope it
// needs; api/register-routes.ts admits the caller before the body is read.
import type { ApiContext } from "../../http/context.js";
import type { RouteSpec } from "../../http/route.js";
import { deployRoutes } from "./deploy.js";
import { execRoutes } from "./exec.js";
import { operationsRoutes } from "./operations.js";
import { rebootRoutes } from "./reboot.js";
import { registryAuthRoutes } from "./registry-auth.js";
import { restartRoutes } from "./restart.js";
import { serversRoutes } from "./servers.js";

export const automationRoutes = (ctx: ApiContext): RouteSpec[] => [
  ...execRoutes(ctx),
  ...operationsRoutes(ctx),
  ...restartRoutes(ctx),
  ...rebootRoutes(ctx),
  ...registryAuthRoutes(ctx),
  ...deployRoutes(ctx),
  ...serversRoutes(ctx),
];

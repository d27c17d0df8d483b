// The route list as a whole: who may call what is read from the declarations
// themselves, so these checks fail when a route loses its credentials, its role
// (auth/roles.ts) or its scope (a refactor that drops `access` would make an /api route public).
import test from "ava";
import type { FastifyInstance } from "fastify";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, credentialsOf, needsOf } from "../http/route.js";
import { loadConfig } from "../config.js";
import { fastifyRoute } from "./register-routes.js";
import { apiRoutes } from "./routes.js";

// Declarations are plain data: nothing here is called, so the context is only read for its config.
const ctx = {
  config: loadConfig({ RELAYCTL_DATABASE_URL: "sqlite://:memory:", RELAYCTL_BUS: "memory" }),
} as unknown as ApiContext;
const routes = apiRoutes(ctx, () => [], {} as FastifyInstance, new AbortController().signal);
const key = (r: RouteSpec) => [r.method].flat().map((m) => `${m} ${r.url}`);
const all = routes.flatMap((r) => key(r).map((k) => [k, r] as const));
const find = (k: string) => all.find(([name]) => name === k)?.[1];

/** What only owners may do (an API key acts as an owner). */
const OWNER_ONLY = [
  "POST /api/automation-keys",
  "PATCH /api/automation-keys/:id",
  "DELETE /api/automation-keys/:id",
  "POST /api/api-keys",
  "DELETE /api/api-keys/:id",
  "POST /api/registry-credentials",
  "DELETE /api/registry-credentials/:id",
  "PUT /api/servers/:server_id/provider",
  "DELETE /api/servers/:server_id/provider",
  "DELETE /api/servers/:server_id",
  "POST /api/servers/join-tokens",
  "POST /api/users/invites",
  "DELETE /api/users/:id",
  "PATCH /api/users/:id",
  "DELETE /api/users/invites/:id",
  "POST /api/github/install-link",
  "POST /api/forges",
  "DELETE /api/forges/:id",
  "PUT /api/applications/:id/forge-repository",
  "DELETE /api/applications/:id/forge-repository",
  // Preview values are secrets like the production env's.
  "PUT /api/applications/:id/preview-env",
  "DELETE /api/applications/:id/preview-env/:name",
];

test("routes - every route is declared once, and no two share a method and URL", (t) => {
  const names = all.map(([k]) => k);
  t.true(names.length > 70, `the whole api is listed (${names.length})`);
  t.deepEqual(
    names.filter((k, i) => names.indexOf(k) !== i),
    [],
  );
});

test("routes - under /api only agent enrollment is public; the Automation API takes keys and access tokens, the rest of /api the management credentials", (t) => {
  for (const [k, r] of all) {
    if (!r.url.startsWith("/api/")) continue;
    const creds = credentialsOf(r.access);
    if (k === "POST /api/agent/enroll") {
      t.deepEqual(creds, [], "enrollment's credential is the join token in its body");
      continue;
    }
    if (k === "GET /api/applications/:id/logs") {
      // A read of the application: an automation key too, within its server scope (logs-api.ts).
      t.deepEqual([...creds].sort(), ["access_token", "api_key", "automation_key", "web_session"], k);
      continue;
    }
    if (r.url.startsWith("/api/automation/v1/")) {
      t.true(creds.includes("automation_key") && creds.includes("access_token"), k);
      t.false(creds.includes("api_key"), k);
    } else {
      t.deepEqual([...creds].sort(), ["access_token", "api_key", "web_session"], k);
    }
  }
});

/** The reads only owners may make: pending invites name people not yet members, by e-mail. */
const OWNER_READS = ["GET /api/users/invites"];

/** What a deployer may change: deploy, roll back, restart (and read an application's logs). */
const DEPLOYER = [
  "POST /api/automation/v1/deploy",
  "POST /api/automation/v1/rollback",
  "POST /api/automation/v1/restart",
  "POST /api/tenants/:tenant_id/applications/:application_id/deploy",
  "POST /api/tenants/:tenant_id/applications/:application_id/rollback",
  "GET /api/applications/:id/logs",
  // A preview is a deployment of the application's code (docs/previews.md).
  "POST /api/applications/:id/previews",
  "DELETE /api/applications/:id/previews/:preview_id",
];
/** What needs the owner role or the person's exec grant: what reads the servers' secrets. */
const EXEC_GRANT = [
  "POST /api/automation/v1/exec",
  "POST /api/automation/v1/registry-auth/login",
  "POST /api/automation/v1/registry-auth/logout",
];

test("routes - the roles: the owners' changes, the deployers' few, exec behind its grant, every other read a viewer's", (t) => {
  const persons = all.filter(([, r]) => credentialsOf(r.access).includes("access_token"));
  const needs = new Map(persons.map(([k, r]) => [k, needsOf(r)]));
  for (const k of OWNER_ONLY) t.like(needs.get(k), { role: "owner" }, k);
  for (const k of DEPLOYER) t.deepEqual(needs.get(k), { role: "deployer" }, k);
  for (const k of EXEC_GRANT) t.deepEqual(needs.get(k), { role: "owner", grant: "exec" }, k);
  for (const [k, n] of needs) {
    if (DEPLOYER.includes(k) || EXEC_GRANT.includes(k)) continue;
    if (OWNER_READS.includes(k)) {
      t.deepEqual(n, { role: "owner" }, k);
      continue;
    }
    // A read is a viewer's; a change an owner's, but for each person's own logins and /mcp (whose tools call the API).
    const own = /^(DELETE \/api\/me\/|POST \/mcp$|DELETE \/mcp$)/.test(k);
    t.deepEqual(n, { role: k.startsWith("GET ") || own ? "viewer" : "owner" }, k);
  }
});

test("routes - each Automation API operation declares the scope of its operation type", (t) => {
  const scopes: Record<string, string> = {
    "POST /api/automation/v1/exec": "exec",
    "POST /api/automation/v1/restart": "restart",
    "POST /api/automation/v1/reboot": "reboot",
    "POST /api/automation/v1/deploy": "deploy",
    "POST /api/automation/v1/registry-auth/login": "registry_login",
    "POST /api/automation/v1/registry-auth/logout": "registry_logout",
    "POST /external-deploy/session": "external_deploy",
  };
  for (const [k, scope] of Object.entries(scopes)) {
    const r = find(k);
    const declared: string | undefined = r && "scope" in r.access ? r.access.scope : undefined;
    t.is(declared, scope, k);
  }
});

test("routes - a public route says why it takes no credential", (t) => {
  for (const [k, r] of all) if ("public" in r.access) t.true(r.access.public.trim().length > 10, k);
});

test("routes - a declaration that cannot be served stops the boot, naming the route", (t) => {
  const handler = async () => null;
  const deps = { db: {} as never };
  t.throws(
    () =>
      fastifyRoute(
        {
          method: "POST",
          url: "/x",
          tag: "t",
          access: { credentials: ["automation_key", "web_session"] },
          handler,
        },
        deps,
      ),
    { message: /POST \/x: beside an automation key, a web session may only read/ },
  );
  t.throws(
    () =>
      fastifyRoute(
        { method: "GET", url: "/y", tag: "t", access: { credentials: ["access_token"] }, handler },
        deps,
      ),
    { message: /GET \/y: credentials must include/ },
  );
});

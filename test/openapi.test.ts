// The OpenAPI document (/openapi.json): valid OpenAPI 3.1, describing every
// route Fastify registered (onRoute), and truthful: the answers of a run of the
// main flows on a real cluster validate against the schemas it documents for
// them.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Ajv2020 from "ajv/dist/2020";
import addFormats from "ajv-formats";
import test, { type ExecutionContext } from "ava";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { buildApi } from "../control-plane/src/api/app";
import { MemoryBus } from "../control-plane/src/bus/memory-bus";
import { loadConfig } from "../control-plane/src/config";
import { migrate, openDb } from "../control-plane/src/db/knex";
import { DeployService } from "../control-plane/src/deployments/service";
import { createLogger } from "../control-plane/src/lib/logger";
import { OperationService } from "../control-plane/src/operations/service";
import { cleanupAll } from "./harness/cleanup";
import { startCluster } from "./harness/cluster";
import { type ApiResponse, type RequestOptions, api, exec, request } from "./harness/http";

test.after.always(cleanupAll);

/** Routes deliberately left out of the document, each with its reason. */
/**
 * The routes whose JSON answers the document describes (what the old URL-keyed table of answers
 * listed, before each route declared its own): none may lose them.
 */
const DOCUMENTED_ANSWERS = [
  "POST /api/automation/v1/exec",
  "GET /api/automation/v1/operations/:operation_id",
  "GET /api/automation/v1/operations",
  "POST /api/automation/v1/restart",
  "POST /api/automation/v1/reboot",
  "POST /api/automation/v1/registry-auth/login",
  "POST /api/automation/v1/registry-auth/logout",
  "POST /api/automation/v1/deploy",
  "POST /api/automation-keys",
  "GET /api/automation-keys",
  "PATCH /api/automation-keys/:id",
  "DELETE /api/automation-keys/:id",
  "GET /api/audit",
  "POST /api/applications",
  "GET /api/applications",
  "GET /api/applications/:id",
  "PATCH /api/applications/:id",
  "DELETE /api/applications/:id",
  "GET /api/servers",
  "PUT /api/servers/:server_id/provider",
  "DELETE /api/servers/:server_id/provider",
  "POST /api/registry-credentials",
  "GET /api/registry-credentials",
  "DELETE /api/registry-credentials/:id",
  "GET /api/tenant",
  "POST /api/tenants/:tenant_id/applications/:application_id/deploy",
  "GET /api/tenants/:tenant_id/applications/:application_id/deployments",
  "GET /api/tenants/:tenant_id/applications/:application_id/deployments/:deployment_id",
  "GET /api/tenants/:tenant_id/applications/:application_id/env",
  "POST /api/tenants/:tenant_id/applications/:application_id/env",
  "DELETE /api/tenants/:tenant_id/applications/:application_id/env/:name",
  "POST /api/agent/enroll",
  "GET /cli/latest",
  "POST /external-deploy/session",
  "DELETE /external-deploy/session/:id",
  "POST /external-deploy/sync",
];

const HIDDEN: Record<string, string> = {
  "/openapi.json": "the document itself",
  "/docs": "the reference page (@fastify/swagger-ui) and its static files",
  "/": "a redirect to the dashboard or to sign-in: a page, not API",
  "/app": "the dashboard's pages and assets (web/dist): pages, not API",
  "/favicon.ico": "a redirect to the dashboard's icon, for pages that name none",
};
const isHidden = (url: string) => Object.keys(HIDDEN).some((p) => url === p || url.startsWith(`${p}/`));

// biome-ignore lint/suspicious/noExplicitAny: an OpenAPI document as parsed JSON
type Doc = any;

/** `/api/x/:id` → `/api/x/{id}`, without a trailing slash (Fastify registers a prefix's "/" both ways). */
const openApiPath = (url: string) => url.replace(/:(\w+)/g, "{$1}").replace(/(.)\/$/, "$1");

test("openapi - the document is valid OpenAPI 3.1 and describes every registered route", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-openapi-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  t.teardown(() => db.destroy());
  await migrate(db);
  const config = loadConfig({ RELAYCTL_DATABASE_URL: url, RELAYCTL_BUS: "memory" });
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const bus = new MemoryBus();
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const app = await buildApi({ config, db, bus, ops, deploys }, log, () => []);
  t.teardown(() => app.close());
  await app.ready();

  const res = await app.inject({ url: "/openapi.json" });
  t.is(res.statusCode, 200);
  const doc: Doc = res.json();
  t.is(doc.openapi, "3.1.0");
  // An ES module: loaded with import() from this CommonJS test.
  const { Validator } = await import("@seriousme/openapi-schema-validator");
  const validity = await new Validator().validate(doc);
  t.true(validity.valid, JSON.stringify(validity.errors, null, 1));

  const seen = app.seenRoutes;
  t.true(seen.length > 50, "the onRoute list holds the whole api");
  for (const r of seen) {
    if (isHidden(r.url)) {
      t.true(r.hidden, `${r.method} ${r.url} is hidden on purpose (${HIDDEN[r.url] ?? "docs"})`);
      continue;
    }
    t.false(r.hidden, `${r.method} ${r.url} must not be hidden`);
    t.truthy(doc.paths[openApiPath(r.url)]?.[r.method.toLowerCase()], `${r.method} ${r.url} is described`);
  }
  // Every route that documented its answers still does: a 2xx answer with a schema, and the errors.
  for (const key of DOCUMENTED_ANSWERS) {
    const [method, url] = key.split(" ");
    const responses = doc.paths[openApiPath(url)]?.[method.toLowerCase()]?.responses ?? {};
    t.true(
      Object.keys(responses).some((s) => s.startsWith("2")) && "4XX" in responses,
      `${key} documents its answers (${Object.keys(responses).join(", ")})`,
    );
  }
  // The credentials of each part of the API.
  t.deepEqual(doc.paths["/api/automation/v1/exec"].post.security, [
    { automationKey: [] },
    { accessToken: [] },
  ]);
  // The dashboard's session cookie is a credential of the management API too.
  t.deepEqual(doc.paths["/api/applications"].get.security, [
    { apiKey: [] },
    { accessToken: [] },
    { webSession: [] },
  ]);
  t.deepEqual(doc.paths["/external-deploy/sync"].post.security, [{ sessionToken: [] }]);
  t.deepEqual(Object.keys(doc.components.securitySchemes).sort(), [
    "accessToken",
    "apiKey",
    "automationKey",
    "metricsToken",
    "sessionToken",
    "webSession",
  ]);
  // The request schema is the validating zod schema (its bounds, its required fields).
  const execBody = doc.paths["/api/automation/v1/exec"].post.requestBody.content["application/json"].schema;
  t.deepEqual(execBody.required, ["server_id", "command"]);
  t.is(execBody.properties.timeout_seconds.maximum, 900);

  const page = await app.inject({ url: "/docs/" });
  t.is(page.statusCode, 200);
  t.regex(page.headers["content-type"] as string, /text\/html/);
});

/** Validates answers against the schemas the document gives their route and status. */
class AnswerChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  readonly checked = new Set<string>();

  constructor(private readonly doc: Doc) {
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: "openapi.json", components: doc.components });
  }

  /** Whether `body` fits the schema documented for this route and status. */
  validates(method: string, route: string, status: number, body: unknown): boolean {
    const op = this.doc.paths[openApiPath(route)][method.toLowerCase()];
    const schema = op.responses[String(status)].content["application/json"].schema;
    return this.ajv.compile(this.relative(schema))(body) as boolean;
  }

  check(t: ExecutionContext, method: string, route: string, res: ApiResponse): ApiResponse {
    const op = this.doc.paths[openApiPath(route)]?.[method.toLowerCase()];
    const what = `${method} ${route} ${res.status}`;
    if (!op) {
      t.fail(`${method} ${route} is not in the document`);
      return res;
    }
    const documented = op.responses[String(res.status)] ?? op.responses[`${String(res.status)[0]}XX`];
    if (!documented) {
      t.fail(`${what} is not documented (${Object.keys(op.responses).join(", ")}): ${res.text}`);
      return res;
    }
    const schema = documented.content?.["application/json"]?.schema;
    if (!schema) {
      t.is(res.text, "", `${what} documents no body`);
    } else {
      const validate = this.ajv.compile(this.relative(schema));
      t.true(
        validate(res.body),
        `${what}: ${this.ajv.errorsText(validate.errors)}\n${res.text.slice(0, 600)}`,
      );
    }
    this.checked.add(what);
    return res;
  }

  /** The schema with its component refs pointing into the document's components. */
  private relative(schema: unknown): object {
    return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/'));
  }
}

test("openapi - real answers of the main flows validate against the documented schemas", async (t) => {
  const c = await startCluster();
  t.teardown(() => c.stop());
  const doc: Doc = (await request(c, "/openapi.json", { key: null })).body;
  const answers = new AnswerChecker(doc);
  const check = (method: string, route: string, res: ApiResponse) => answers.check(t, method, route, res);
  // The checker itself refuses an answer that breaks its schema (a finished exec without exit_code).
  t.false(
    answers.validates("POST", "/api/automation/v1/exec", 200, {
      operation_id: randomUUID(),
      status: "completed",
    }),
  );
  const apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "docs"])).key);
  const mgmt = (path: string, opts: RequestOptions = {}) =>
    request(c, path, { ...opts, key: null, headers: { ...opts.headers, "x-api-key": apiKey } });
  const A = "/api/automation/v1";

  // Automation API: exec (finished and still running), an operation, a run, errors.
  const runId = `docs-${randomUUID()}`;
  const done = check(
    "POST",
    `${A}/exec`,
    await exec(c, { server_id: c.serverId, command: "echo hi", run_id: runId }),
  );
  t.is(done.status, 200);
  const slow = { server_id: c.serverId, command: "sleep 2", run_id: runId, timeout_seconds: 1 };
  t.is(check("POST", `${A}/exec`, await exec(c, slow)).status, 202);
  const opId = String(done.json.operation_id);
  t.is(check("GET", `${A}/operations/:operation_id`, await api(c, `/operations/${opId}`)).status, 200);
  t.is(check("GET", `${A}/operations`, await api(c, `/operations?run_id=${runId}`)).status, 200);
  t.is(
    check("GET", `${A}/operations/:operation_id`, await api(c, `/operations/${randomUUID()}`)).status,
    404,
  );
  t.is(check("POST", `${A}/exec`, await exec(c, { server_id: c.serverId, command: "" })).status, 422);
  const logout = await api(c, "/registry-auth/logout", {
    body: { server_id: c.serverId, registry_url: "registry.example.com" },
  });
  t.is(check("POST", `${A}/registry-auth/logout`, logout).status, 200);

  // Keys.
  const created = check(
    "POST",
    "/api/automation-keys",
    await mgmt("/api/automation-keys", { body: { name: "docs" } }),
  );
  t.is(created.status, 201);
  const keyPath = `/api/automation-keys/${String(created.json.id)}`;
  t.is(check("GET", "/api/automation-keys", await mgmt("/api/automation-keys")).status, 200);
  const patched = await mgmt(keyPath, { method: "PATCH", body: { rate_limit: 50 } });
  t.is(check("PATCH", "/api/automation-keys/:id", patched).status, 200);
  t.is(check("DELETE", "/api/automation-keys/:id", await mgmt(keyPath, { method: "DELETE" })).status, 204);

  // Servers, tenant, applications.
  t.is(check("GET", "/api/servers", await mgmt("/api/servers")).status, 200);
  t.is(check("GET", "/api/tenant", await mgmt("/api/tenant")).status, 200);
  const appBody = {
    name: `docs-${randomUUID().slice(0, 8)}`,
    server_id: c.serverId,
    linked_container_name: "docs-web",
    container_port: 8080,
    fqdns: ["docs.example.com"],
    git_repository: join(c.dir, "no-such-repository"),
  };
  const application = check("POST", "/api/applications", await mgmt("/api/applications", { body: appBody }));
  t.is(application.status, 201);
  const appId = String(application.json.id);
  t.is(check("GET", "/api/applications", await mgmt("/api/applications")).status, 200);
  t.is(check("GET", "/api/applications/:id", await mgmt(`/api/applications/${appId}`)).status, 200);
  const appPatch = await mgmt(`/api/applications/${appId}`, {
    method: "PATCH",
    body: { container_port: 8081 },
  });
  t.is(check("PATCH", "/api/applications/:id", appPatch).status, 200);
  t.is(check("POST", "/api/applications", await mgmt("/api/applications", { body: appBody })).status, 409);

  // Environment and registry credentials (sealed with the harness's master key).
  const base = "/api/tenants/:tenant_id/applications/:application_id";
  const appBase = `/api/tenants/${c.tenantId}/applications/${appId}`;
  const env = await mgmt(`${appBase}/env`, { body: { variables: { GREETING: "hello" } } });
  t.is(check("POST", `${base}/env`, env).status, 200);
  t.is(check("GET", `${base}/env`, await mgmt(`${appBase}/env`)).status, 200);
  t.is(
    check("DELETE", `${base}/env/:name`, await mgmt(`${appBase}/env/GREETING`, { method: "DELETE" })).status,
    204,
  );
  const credential = await mgmt("/api/registry-credentials", {
    body: { name: "docs", registry_url: "registry.example.com", username: "u", password: "p" },
  });
  t.is(check("POST", "/api/registry-credentials", credential).status, 201);
  t.is(check("GET", "/api/registry-credentials", await mgmt("/api/registry-credentials")).status, 200);
  const credentialPath = `/api/registry-credentials/${String(credential.json.id)}`;
  t.is(
    check("DELETE", "/api/registry-credentials/:id", await mgmt(credentialPath, { method: "DELETE" })).status,
    204,
  );

  // Deploy requests (the repository does not exist: they end failed, their answers are what counts).
  const deploy = await api(c, "/deploy", { body: { application_id: appId } });
  t.is(check("POST", `${A}/deploy`, deploy).status, 202);
  t.is(check("POST", `${base}/deploy`, await mgmt(`${appBase}/deploy`, { body: {} })).status, 202);
  t.is(check("GET", `${base}/deployments`, await mgmt(`${appBase}/deployments`)).status, 200);
  const one = await mgmt(`${appBase}/deployments/${String(deploy.json.deployment_id)}`);
  t.is(check("GET", `${base}/deployments/:deployment_id`, one).status, 200);

  // External deploy: a session, a sync (the agent drives no proxy: an `errors` entry), its end.
  // The cluster's key holds every operation (external_deploy among them).
  const session = await request(c, "/external-deploy/session", {
    body: { container_names: ["docs-web", "unknown-web"] },
  });
  t.is(check("POST", "/external-deploy/session", session).status, 201);
  const token = String(session.json.session_token);
  const sync = await request(c, "/external-deploy/sync", {
    key: token,
    body: { deployments: [{ container_name: "docs-web", container_port: 8081, image_tag: "web:1" }] },
  });
  t.is(check("POST", "/external-deploy/sync", sync).status, 200);
  const ended = await request(c, `/external-deploy/session/${String(session.json.session_id)}`, {
    method: "DELETE",
    key: token,
  });
  t.is(check("DELETE", "/external-deploy/session/:id", ended).status, 204);

  // The audit trail of all of it.
  t.is(check("GET", "/api/audit", await mgmt("/api/audit?limit=1000")).status, 200);
  t.true(answers.checked.size >= 30, `checked ${answers.checked.size} answers`);
});

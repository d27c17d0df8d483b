// The deployments API on the SQLite store and the in-process bus, with no agent
// connected: what is recorded, what is shown, what is refused, and that a
// deploy to an agent that never connects waits and ends `timeout` at its
// deadline. (Deploys that run go through real agents in test/deploy-*.test.ts.)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pollUntil } from "@relayctl/devkit";
import anyTest, { type ExecutionContext, type TestFn } from "ava";
import type { FastifyInstance } from "fastify";
import { buildApi } from "../api/app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { enrollAgent } from "../auth/agent-credentials.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { createApiKey, createAutomationKey, createJoinToken, createTenant } from "../cli/admin.js";
import { loadConfig } from "../config.js";
import { type Db, migrate, openDb } from "../db/knex.js";
import { createLogger } from "../lib/logger.js";
import { OperationService } from "../operations/service.js";
import { DeployService } from "./service.js";

interface Ctx {
  app: FastifyInstance;
  db: Db;
  dir: string;
  deploys: DeployService;
  tenantId: string;
  serverId: string;
  key: string;
  apiKey: string;
  otherApiKey: string;
}
const test = anyTest as TestFn<Ctx>;

const MASTER_KEY = Buffer.alloc(32, 7).toString("base64");
const SECRET = "s3cret-value-that-must-not-leak";

test.before(async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-deploy-api-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  await migrate(db);
  const config = loadConfig({
    RELAYCTL_DATABASE_URL: url,
    RELAYCTL_BUS: "memory",
    RELAYCTL_MASTER_KEY: MASTER_KEY,
  });
  const bus = new MemoryBus();
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const app = await buildApi({ config, db, bus, ops, deploys }, log, () => []);
  const tenant = await createTenant(db, "deployers");
  const other = await createTenant(db, "others");
  const { join_token } = await createJoinToken(db, {
    tenant: tenant.tenant_id,
    serverName: "web-1",
    ttlMinutes: 5,
  });
  const enrolled = await enrollAgent(db, { token: join_token, ip: "127.0.0.1" });
  const { key } = await createAutomationKey(db, { tenant: tenant.tenant_id, name: "ci", rateLimit: 1000 });
  const apiKey = (await createApiKey(db, { tenant: tenant.tenant_id, name: "mgmt" })).key;
  const otherApiKey = (await createApiKey(db, { tenant: other.tenant_id, name: "theirs" })).key;
  t.context = {
    app,
    db,
    dir,
    deploys,
    tenantId: tenant.tenant_id,
    serverId: enrolled.server_id,
    key,
    apiKey,
    otherApiKey,
  };
});

test.after.always(async (t) => {
  await t.context.app?.close();
  await t.context.deploys?.close();
  await t.context.db?.destroy();
  if (t.context.dir) rmSync(t.context.dir, { recursive: true, force: true });
});

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies of many shapes, checked field by field
type Call = { status: number; body: any };
async function api(
  t: { context: Ctx },
  method: string,
  url: string,
  body?: unknown,
  key?: string,
): Promise<Call> {
  const res = await t.context.app.inject({
    method: method as "GET",
    url,
    headers: url.startsWith("/api/automation")
      ? { authorization: `Bearer ${key ?? t.context.key}` }
      : { "x-api-key": key ?? t.context.apiKey },
    ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
  });
  return { status: res.statusCode, body: res.body ? res.json() : undefined };
}

const RUN_CONTEXT = {
  provider: "github",
  repository: "acme/shop",
  workflow: "deploy.yml",
  trigger: "push",
  actor: "octocat",
  sha: "89abcdef0123456789abcdef0123456789abcdef",
  ref: "refs/heads/main",
};

/** The payload of the operation's `operation.deploy` audit event (the start event). */
async function deployEvent(t: ExecutionContext<Ctx>, operationId: string) {
  const rows = await t.context
    .db("audit_events")
    .where({ operation_id: operationId, event_type: "operation.deploy" })
    .select("payload");
  t.is(rows.length, 1);
  const payload = rows[0]!.payload;
  return (typeof payload === "string" ? JSON.parse(payload) : payload) as Record<string, unknown>;
}

let n = 0;
async function newApp(t: ExecutionContext<Ctx>, extra: Record<string, unknown> = {}) {
  n += 1;
  const res = await api(t, "POST", "/api/applications", {
    name: `app-${n}`,
    server_id: t.context.serverId,
    linked_container_name: `app-${n}`,
    container_port: 8080,
    git_repository: "https://git.example.test/org/app.git",
    ...extra,
  });
  t.is(res.status, 201, JSON.stringify(res.body));
  return res.body as { id: string } & Record<string, unknown>;
}

test("applications - source, build and health check defaults; the git password is never shown", async (t) => {
  const created = await newApp(t, { git_credential: { username: "bot", password: SECRET } });
  t.like(created, {
    git_repository: "https://git.example.test/org/app.git",
    deploy_branch: "main",
    build: { type: "dockerfile", dockerfile: "Dockerfile", context: "." },
    health_check_path: "/",
    health_check_timeout_seconds: 30,
    auto_deploy: false,
  });
  t.is((created.git_credential as { username: string }).username, "bot");
  const read = await api(t, "GET", `/api/applications/${created.id}`);
  t.false(JSON.stringify(read.body).includes(SECRET));
  const stored = await t.context.db("applications").where({ id: created.id }).first();
  t.false(JSON.stringify(stored).includes(SECRET), "sealed at rest");
  const audit = await t.context.db("audit_events").select("payload");
  t.false(JSON.stringify(audit).includes(SECRET), "not in the audit trail");
});

// Local paths are refused unless the operator allows them (test/security-git-sources.test.ts).
test("applications - https, ssh:// and scp-like ssh sources are taken as given", async (t) => {
  for (const url of [
    "https://git.example.test/org/app.git",
    "ssh://git@git.example.test:2222/org/app.git",
    "git@github.com:org/app.git",
  ]) {
    const created = await newApp(t, { git_repository: url, deploy_branch: "release" });
    t.like(created, { git_repository: url, deploy_branch: "release", build: { type: "dockerfile" } });
  }
});

test("applications - bad sources are 422 with the field named", async (t) => {
  const cases: [Record<string, unknown>, string][] = [
    [
      { git_repository: "https://bot:pw@git.example.test/x.git" },
      "git_repository: credentials do not belong",
    ],
    [{ git_repository: "relative/path" }, "git_repository: use an https://"],
    [
      { build: { type: "dockerfile", dockerfile: "../etc/passwd" } },
      "build.dockerfile: must be a relative path",
    ],
    [{ build: { type: "image", image: "-rm" } }, "build.image: must be an image reference"],
    [
      {
        build: {
          type: "image",
          image: "r.test/x:1",
          registry_credential_id: "00000000-0000-4000-8000-000000000000",
        },
      },
      "build.registry_credential_id: unknown registry credential",
    ],
    [{ health_check_path: "healthz" }, "health_check_path: must be an absolute URL path"],
    [{ deploy_branch: "a..b" }, "deploy_branch: must be a branch"],
  ];
  for (const [extra, detail] of cases) {
    const res = await api(t, "POST", "/api/applications", {
      name: `bad-${Math.random()}`,
      server_id: t.context.serverId,
      linked_container_name: "bad",
      container_port: 80,
      ...extra,
    });
    t.is(res.status, 422, JSON.stringify(extra));
    t.true(String(res.body.detail).startsWith(detail), `${res.body.detail} should start with ${detail}`);
  }
});

test("env - write-only: names and times listed, values sealed, bounded, removable", async (t) => {
  const app = await newApp(t);
  const base = `/api/tenants/${t.context.tenantId}/applications/${app.id}/env`;
  const set = await api(t, "POST", base, { variables: { DATABASE_PASSWORD: SECRET, MODE: "prod" } });
  t.is(set.status, 200);
  t.deepEqual(
    set.body.variables.map((v: { name: string }) => v.name),
    ["DATABASE_PASSWORD", "MODE"],
  );
  t.false(JSON.stringify(set.body).includes(SECRET));
  const rows = await t.context.db("application_env").where({ application_id: app.id });
  t.false(JSON.stringify(rows).includes(SECRET), "sealed at rest");
  t.false(JSON.stringify(await t.context.db("audit_events").select("payload")).includes(SECRET));
  const tooMany = Object.fromEntries(Array.from({ length: 199 }, (_, i) => [`V${i}`, "x"]));
  const over = await api(t, "POST", base, { variables: tooMany });
  t.is(over.status, 422);
  t.regex(over.body.detail, /at most 200 \(would be 201\)/);
  t.is((await api(t, "DELETE", `${base}/MODE`)).status, 204);
  t.is((await api(t, "DELETE", `${base}/MODE`)).status, 404);
  t.deepEqual(
    (await api(t, "GET", base)).body.variables.map((v: { name: string }) => v.name),
    ["DATABASE_PASSWORD"],
  );
});

test("deploy - 202 at once; queued while the agent is away; timeout at the deadline; history shows it", async (t) => {
  const app = await newApp(t);
  const res = await api(t, "POST", "/api/automation/v1/deploy", {
    application_id: app.id,
    commit_ref: "v1.2.3",
    env_overrides: { ONCE: SECRET },
    timeout_seconds: 1,
    run_id: "run-1",
    run_context: RUN_CONTEXT,
  });
  t.is(res.status, 202);
  t.is(res.body.status, "running");
  const history = `/api/tenants/${t.context.tenantId}/applications/${app.id}/deployments`;
  const first = await api(t, "GET", history);
  t.is(first.body.deployments[0].status, "queued");
  t.is(first.body.deployments[0].commit_ref, "v1.2.3");
  t.deepEqual(first.body.deployments[0].triggered_by.type, "automation_key");
  const op = await pollUntil(
    async () => {
      const r = await api(t, "GET", `/api/automation/v1/operations/${res.body.operation_id}`);
      return r.body.status === "running" ? undefined : r.body;
    },
    { timeoutMs: 10_000, what: "the deploy to end at its deadline" },
  );
  t.is(op.status, "timeout");
  t.is(op.operation_type, "deploy");
  t.is(op.run_id, "run-1");
  t.regex(op.result.stderr, /not connected/);
  const after = await api(t, "GET", `${history}/${res.body.deployment_id}`);
  t.is(after.body.status, "timeout");
  const audit = await t.context
    .db("audit_events")
    .where({ operation_id: res.body.operation_id })
    .select("payload");
  t.false(JSON.stringify(audit).includes(SECRET), "overrides audited by name only");
  const started = await deployEvent(t, res.body.operation_id);
  t.like(started, {
    run_id: "run-1",
    run_context: RUN_CONTEXT,
    application_id: app.id,
    deployment_id: res.body.deployment_id,
    commit_ref: "v1.2.3",
    env_override_keys: ["ONCE"],
    timeout_seconds: 1,
    trigger: "api",
  });
  // The run's operations are grouped by run_id in the tenant's listing.
  const listed = await api(t, "GET", "/api/operations?run_id=run-1");
  t.deepEqual(
    listed.body.operations.map((o: { operation_id: string }) => o.operation_id),
    [res.body.operation_id],
  );
});

test("deploy - timeout_seconds defaults to 60: the operation's deadline", async (t) => {
  const app = await newApp(t);
  const res = await api(t, "POST", "/api/automation/v1/deploy", { application_id: app.id });
  t.is(res.status, 202);
  const row = await t.context
    .db("operations")
    .where({ id: res.body.operation_id })
    .first<{ started_at: number; deadline_at: number }>("started_at", "deadline_at");
  const ms = Number(row!.deadline_at) - Number(row!.started_at);
  t.true(ms > 59_000 && ms <= 60_000, `deadline ${ms} ms after the start`);
  t.like(await deployEvent(t, res.body.operation_id), { timeout_seconds: 60, trigger: "api" });
});

test("deploy - another tenant's application or tenant id is 404; validation is 422", async (t) => {
  const app = await newApp(t);
  const path = `/api/tenants/${t.context.tenantId}/applications/${app.id}`;
  for (const [method, url] of [
    ["POST", `${path}/deploy`],
    ["GET", `${path}/deployments`],
    ["GET", `${path}/env`],
    ["POST", `${path}/env`],
  ] as const) {
    const body = method === "POST" ? (url.endsWith("env") ? { variables: { A: "1" } } : {}) : undefined;
    t.is((await api(t, method, url, body, t.context.otherApiKey)).status, 404, `${method} ${url}`);
  }
  const wrongTenant = `/api/tenants/00000000-0000-4000-8000-000000000000/applications/${app.id}/deployments`;
  t.is((await api(t, "GET", wrongTenant)).status, 404);
  const unknown = await api(t, "POST", "/api/automation/v1/deploy", {
    application_id: "00000000-0000-4000-8000-000000000000",
  });
  t.is(unknown.status, 404);
  const bad = await api(t, "POST", "/api/automation/v1/deploy", {
    application_id: app.id,
    timeout_seconds: 0,
  });
  t.deepEqual(bad, { status: 422, body: { detail: "timeout_seconds: must be >= 1" } });
  const external = await api(t, "POST", "/api/applications", {
    name: "external-only",
    server_id: t.context.serverId,
    linked_container_name: "ext",
    container_port: 80,
  });
  const notDeployable = await api(t, "POST", "/api/automation/v1/deploy", {
    application_id: external.body.id,
  });
  t.is(notDeployable.status, 422);
  t.regex(notDeployable.body.detail, /nothing to deploy from/);
});

test("deploy - the tenant endpoint tells a key its tenant id", async (t) => {
  const res = await api(t, "GET", "/api/tenant");
  t.deepEqual(res.body, { id: t.context.tenantId, name: "deployers" });
});

// Who may deploy what (issue 11), with no image built: another tenant's
// application and a tenant_id that is not the key's own are 404 on every
// deployment endpoint; a key without the deploy scope or outside the
// application's server is 403; bad input is 422 and leaves no deployment; the
// application's new fields have their defaults and the git password is never
// shown. A deployment whose repository cannot be fetched fails at `fetch`, and
// one to an agent that is not connected waits for it: it runs when the agent
// connects, and ends `timeout` at its deadline when it never does.
import { randomUUID } from "node:crypto";
import test, { type ExecutionContext } from "ava";
import { UUID, assertDetailOnly, describe } from "./harness/assertions";
import { enroll } from "./harness/agent";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type ApiResponse, type RequestOptions, request, waitForOperationEnd } from "./harness/http";

let s: DeployStack;
/** An application of the cluster's tenant whose repository does not exist. */
let own: App;
let ownDeployment: string;
/** The other tenant: its id, rck_ key, rca_ key, application and deployment. */
const other = { tenantId: "", apiKey: "", autoKey: "", appId: "", deploymentId: "", operationId: "" };

test.before(async () => {
  s = await startDeployStack();
  own = await s.createApp({ git_repository: `${makeTempDir("missing")}/no-such-repo` });
  const tenant = await s.c.admin(["create-tenant", "--name", `other-${randomUUID().slice(0, 6)}`]);
  other.tenantId = String(tenant.tenant_id);
  other.apiKey = String((await s.c.admin(["create-api-key", "--tenant", other.tenantId, "--name", "k"])).key);
  other.autoKey = String(
    (await s.c.admin(["create-automation-key", "--tenant", other.tenantId, "--name", "a"])).key,
  );
  const token = await s.c.admin(["create-join-token", "--tenant", other.tenantId, "--server-name", "far"]);
  const server = await enroll(s.c.api.apiUrl, String(token.join_token), makeTempDir("other-agent"));
  const created = await otherManage("/applications", {
    body: {
      name: "theirs",
      server_id: server.server_id,
      linked_container_name: "theirs",
      container_port: 8080,
      fqdns: ["theirs.deploy.test"],
      git_repository: "/nowhere",
    },
  });
  if (created.status !== 201) throw new Error(`other tenant's application: ${describe(created)}`);
  other.appId = String(created.json.id);
});
test.after.always(cleanupAll);

function otherManage(path: string, opts: RequestOptions = {}): Promise<ApiResponse> {
  return request(s.c, `/api${path}`, { ...opts, key: null, headers: { "x-api-key": other.apiKey } });
}

test.serial("deploy - a repository that cannot be fetched fails at fetch", async (t) => {
  const d = await s.deployAndWait(own.id, { timeout_seconds: 30 });
  ownDeployment = d.deploymentId;
  t.like(d.op.json, { operation_type: "deploy", status: "failed", result: { exit_code: 1 } }, describe(d.op));
  t.regex(String((d.op.json.result as Record<string, unknown>).stderr), /^fetch: /);
  const v = await s.deployment(own.id, d.deploymentId);
  t.like(v.json, { status: "failed", failed_step: "fetch", commit_sha: null });
  t.deepEqual(await s.containersOf(own.id), []);
});

test.serial("deploy - to an agent that is not connected waits until its deadline", async (t) => {
  const started = await request(s.c, "/api/automation/v1/deploy", {
    key: other.autoKey,
    body: { application_id: other.appId, timeout_seconds: 2 },
  });
  t.is(started.status, 202, describe(started));
  other.deploymentId = String(started.json.deployment_id);
  other.operationId = String(started.json.operation_id);
  const op = await request(s.c, `/api/automation/v1/operations/${other.operationId}`, { key: other.autoKey });
  t.is(op.json.status, "running", describe(op));
  const t0 = Date.now();
  const done = await waitForOperationEnd(
    { baseUrl: s.c.baseUrl, key: other.autoKey },
    other.operationId,
    30_000,
  );
  t.is(done.json.status, "timeout", describe(done));
  t.true(Date.now() - t0 < 20_000);
  const v = await otherManage(
    `/tenants/${other.tenantId}/applications/${other.appId}/deployments/${other.deploymentId}`,
  );
  t.like(v.json, { status: "timeout" }, describe(v));
});

test.serial(
  "deploy - to an agent that is away runs once the agent connects, before its deadline",
  async (t) => {
    await s.c.agent.stop();
    const started = await s.deploy(own.id, { timeout_seconds: 90 });
    t.is(started.status, 202, describe(started));
    const id = String(started.json.deployment_id);
    const operationId = String(started.json.operation_id);
    const waiting = await s.deployment(own.id, id);
    t.like(waiting.json, { status: "queued", started_at: null }, describe(waiting));
    const op = await request(s.c, `/api/automation/v1/operations/${operationId}`, {});
    t.is(op.json.status, "running", describe(op));
    await s.c.agent.start();
    const done = await s.waitOperation(operationId, 60_000);
    // It reached the agent and ran: the missing repository fails at fetch, not at the deadline.
    t.like(done.json, { status: "failed", result: { exit_code: 1 } }, describe(done));
    t.regex(String((done.json.result as Record<string, unknown>).stderr), /^fetch: /);
    const v = await s.deployment(own.id, id);
    t.like(v.json, { status: "failed", failed_step: "fetch" }, describe(v));
  },
);

test.serial("tenant - GET /api/tenant names the key's tenant", async (t) => {
  const res = await s.manage("/tenant");
  t.is(res.status, 200, describe(res));
  t.is(res.json.id, s.tenantId);
  t.is(typeof res.json.name, "string");
  const theirs = await otherManage("/tenant");
  t.is(theirs.json.id, other.tenantId);
});

/** Every deployment endpoint of an application, as [method, path, body]. */
function endpoints(tenantId: string, appId: string, deploymentId: string): [string, string, unknown][] {
  const base = `/tenants/${tenantId}/applications/${appId}`;
  return [
    ["POST", `${base}/deploy`, {}],
    ["GET", `${base}/deployments`, undefined],
    ["GET", `${base}/deployments/${deploymentId}`, undefined],
    ["GET", `${base}/deployments/${deploymentId}/log`, undefined],
    ["POST", `${base}/env`, { variables: { A: "b" } }],
    ["GET", `${base}/env`, undefined],
    ["DELETE", `${base}/env/A`, undefined],
  ];
}

async function assertAll404(t: ExecutionContext, list: [string, string, unknown][]) {
  for (const [method, path, body] of list) {
    const res = await s.manage(path, { method, body });
    t.is(res.status, 404, `${method} ${path}: ${describe(res)}`);
    t.deepEqual(Object.keys(res.json), ["detail"], `${method} ${path}`);
  }
}

test.serial(
  "tenant - another tenant's id is 404 on every endpoint, even with their own application",
  async (t) => {
    await assertAll404(t, endpoints(other.tenantId, own.id, ownDeployment));
    await assertAll404(t, endpoints(other.tenantId, other.appId, other.deploymentId));
    await assertAll404(t, endpoints(randomUUID(), own.id, ownDeployment));
  },
);

test.serial("tenant - another tenant's application or deployment is 404 under our tenant id", async (t) => {
  await assertAll404(t, endpoints(s.tenantId, other.appId, other.deploymentId));
  // Our application, their deployment (and a made-up one).
  await assertAll404(t, endpoints(s.tenantId, own.id, other.deploymentId).slice(2, 4));
  await assertAll404(t, endpoints(s.tenantId, own.id, randomUUID()).slice(2, 4));
  assertDetailOnly(t, await s.deploy(other.appId), 404);
  assertDetailOnly(t, await s.deploy(randomUUID()), 404);
  const op = await request(s.c, `/api/automation/v1/operations/${other.operationId}`, {});
  assertDetailOnly(t, op, 404);
  const listed = await s.manage("/applications");
  t.is(listed.status, 200, describe(listed));
  t.false(listed.text.includes(other.appId), "our listing shows their application");
  assertDetailOnly(t, await s.manage(`/applications/${other.appId}`), 404);
  assertDetailOnly(
    t,
    await s.manage(`/applications/${other.appId}`, { method: "PATCH", body: { auto_deploy: true } }),
    404,
  );
  // And the other way round: their keys see nothing of ours.
  const theirs = await otherManage(`/tenants/${other.tenantId}/applications/${own.id}/deployments`);
  assertDetailOnly(t, theirs, 404);
  const auto = await request(s.c, "/api/automation/v1/deploy", {
    key: other.autoKey,
    body: { application_id: own.id },
  });
  assertDetailOnly(t, auto, 404);
});

async function historyCount(): Promise<number> {
  const res = await s.history(own.id, "?limit=100");
  return (res.json.deployments as unknown[]).length;
}

test.serial("validation - bad deploy input is 422 and starts nothing", async (t) => {
  const before = await historyCount();
  const many = Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`K${i}`, "v"]));
  const big = { BIG: "x".repeat(65 * 1024) };
  const bad: Record<string, unknown>[] = [
    { env_overrides: many },
    { env_overrides: big },
    { env_overrides: { "not a name": "v" } },
    { env_overrides: { A: 1 } },
    { timeout_seconds: 0 },
    { timeout_seconds: 3601 },
    { timeout_seconds: 1.5 },
    { timeout_seconds: "60" },
    { commit_ref: 42 },
  ];
  for (const body of bad) {
    assertDetailOnly(t, await s.deploy(own.id, body), 422);
    assertDetailOnly(t, await s.dashboardDeploy(own.id, body), 422);
  }
  assertDetailOnly(t, await s.deploy("not-a-uuid"), 422);
  assertDetailOnly(t, await request(s.c, "/api/automation/v1/deploy", { body: {} }), 422);
  assertDetailOnly(t, await s.setEnv(own.id, many), 422);
  assertDetailOnly(t, await s.setEnv(own.id, big), 422);
  t.is(await historyCount(), before);
});

test.serial("scope - a key without deploy, or outside the application's server, is 403", async (t) => {
  const key = async (scope: Record<string, unknown>) => {
    const res = await s.manage("/automation-keys", {
      body: { name: `k-${randomUUID().slice(0, 6)}`, ...scope },
    });
    if (res.status !== 201) throw new Error(`create key: ${describe(res)}`);
    return String(res.json.key);
  };
  const before = await historyCount();
  assertDetailOnly(t, await s.deploy(own.id, {}, await key({ operations: ["exec"] })), 403);
  const elsewhere = await s.c.addServer({ start: false });
  assertDetailOnly(t, await s.deploy(own.id, {}, await key({ servers: [elsewhere.serverId] })), 403);
  const allowed = await s.deploy(own.id, { timeout_seconds: 30 }, await key({ operations: ["deploy"] }));
  t.is(allowed.status, 202, describe(allowed));
  t.regex(String(allowed.json.deployment_id), UUID);
  await s.waitOperation(String(allowed.json.operation_id));
  t.is(await historyCount(), before + 1);
});

test.serial(
  "application - deployment fields have their defaults; the git password is never shown",
  async (t) => {
    const got = await s.manage(`/applications/${own.id}`);
    t.like(got.json, {
      deploy_branch: "main",
      health_check_path: "/",
      health_check_timeout_seconds: 30,
      auto_deploy: false,
      git_credential: null,
      build: { type: "dockerfile" },
    });
    const password = `pw-${randomUUID()}`;
    const patched = await s.manage(`/applications/${own.id}`, {
      method: "PATCH",
      body: { git_credential: { username: "u", password } },
    });
    t.is(patched.status, 200, describe(patched));
    t.like(patched.json.git_credential, { username: "u" });
    t.false(patched.text.includes(password));
    const list = await s.manage("/applications");
    t.false(list.text.includes(password));
    for (const body of [
      { health_check_timeout_seconds: 0 },
      { health_check_timeout_seconds: 601 },
      { build: { type: "compose" } },
      { build: { type: "image" } },
      { git_credential: { username: "u" } },
    ]) {
      const res = await s.manage(`/applications/${own.id}`, { method: "PATCH", body });
      assertDetailOnly(t, res, 422);
    }
  },
);

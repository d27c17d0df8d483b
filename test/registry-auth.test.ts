// Registry credentials and POST /registry-auth/login|logout against a real
// registry: Debian's docker-registry with htpasswd auth on a loopback port, and
// the real docker CLI on the agent (no daemon needed for login/logout; docker
// treats 127.0.0.0/8 as an insecure registry and falls back to plain http).
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { UUID, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, type RequestOptions, api, request, waitForOperationEnd } from "./harness/http";
import { filesUnder } from "./harness/leaks";
import { startRegistry } from "./harness/registry";

const USER = "ci-bot";
const PASSWORD = `pw-${randomBytes(12).toString("hex")}`;
const WRONG_PASSWORD = `wrong-${randomBytes(12).toString("hex")}`;

let c: Cluster;
let apiKey: string;
let registry: string;
let dockerConfig: string;
/** Every answer the tests got, searched for the password at the end. */
const answers: string[] = [];

async function call(path: string, opts: RequestOptions): Promise<ApiResponse> {
  const res = path.startsWith("/api/") ? await request(c, path, opts) : await api(c, path, opts);
  answers.push(res.text);
  return res;
}

const credentials = (opts: RequestOptions = {}, path = "") =>
  call(`/api/registry-credentials${path}`, { ...opts, key: null, headers: { "x-api-key": apiKey } });

async function createCredential(name: string, password: string, registryUrl = `http://${registry}`) {
  const res = await credentials({ body: { name, registry_url: registryUrl, username: USER, password } });
  if (res.status !== 201) throw new Error(`create credential: ${describe(res)}`);
  return String(res.json.id);
}

function dockerAuths(): Record<string, unknown> {
  const file = join(dockerConfig, "config.json");
  if (!existsSync(file)) return {};
  return (JSON.parse(readFileSync(file, "utf8")).auths ?? {}) as Record<string, unknown>;
}

test.before(async () => {
  registry = (await startRegistry(USER, PASSWORD)).host;
  dockerConfig = makeTempDir("docker-config");
  c = await startCluster({
    agentEnv: {
      DOCKER_CONFIG: dockerConfig,
      RELAYCTL_AGENT_CONTAINER_ENGINE: "docker",
      PATH: `/usr/local/bin:${process.env.PATH}`,
    },
  });
  apiKey = String(
    (await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "registry-admin"])).key,
  );
});
test.after.always(cleanupAll);

test.serial("registry credentials - create, list and delete; the password is never shown", async (t) => {
  const created = await credentials({
    body: { name: "local", registry_url: `http://${registry}/`, username: USER, password: PASSWORD },
  });
  t.is(created.status, 201, describe(created));
  t.regex(String(created.json.id), UUID);
  t.like(created.json, { name: "local", registry_url: registry, registry_type: "generic", username: USER });
  t.false("password" in created.json);
  const hub = await credentials({
    body: { name: "hub", registry_url: "docker.io", username: "u", password: "p-1234" },
  });
  t.like(
    hub.json,
    { registry_url: "https://index.docker.io/v1/", registry_type: "dockerhub" },
    describe(hub),
  );

  const list = await credentials();
  t.is(list.status, 200, describe(list));
  t.deepEqual(
    (list.body as { name: string }[]).map((x) => x.name),
    ["local", "hub"],
  );
  t.false(list.text.includes("password"), list.text);

  const dup = await credentials({
    body: { name: "hub", registry_url: "", username: "u", password: "p-1234" },
  });
  assertDetailOnly(t, dup, 409);
  const del = await credentials({ method: "DELETE" }, `/${hub.json.id}`);
  t.is(del.status, 204, describe(del));
});

test.serial(
  "registry credentials - delete is 204, then 404; bad input is 422; no X-API-Key is 401",
  async (t) => {
    const id = await createCredential("to-delete", "pw-to-delete-1234");
    const del = await credentials({ method: "DELETE" }, `/${id}`);
    t.is(del.status, 204, describe(del));
    assertDetailOnly(t, await credentials({ method: "DELETE" }, `/${id}`), 404);
    assertDetailOnly(
      t,
      await credentials({ body: { name: "x", registry_url: "a b", username: "u", password: "p" } }),
      422,
    );
    assertDetailOnly(t, await credentials({ body: { name: "x", registry_url: "", username: "u" } }), 422);
    const anon = await request(c, "/api/registry-credentials", { key: null });
    assertDetailOnly(t, anon, 401);
    const bearer = await request(c, "/api/registry-credentials", {});
    assertDetailOnly(t, bearer, 401);
  },
);

test.serial("registry login - the right password logs the server in (202, then exit_code 0)", async (t) => {
  const id = await createCredential("good", PASSWORD);
  const res = await call("/registry-auth/login", {
    body: { server_id: c.serverId, credential_id: id, run_id: "r-login", run_context: { actor: "ci" } },
  });
  t.is(res.status, 202, describe(res));
  t.regex(String(res.json.operation_id), UUID);
  t.deepEqual(
    { ...res.json, operation_id: "x" },
    { operation_id: "x", status: "running", registry_url: registry, registry_type: "generic" },
  );
  const op = await waitForOperationEnd(c, String(res.json.operation_id), 30_000);
  answers.push(op.text);
  t.is(op.json.operation_type, "registry_login", describe(op));
  t.is(op.json.status, "completed", describe(op));
  t.like(op.json.result, { exit_code: 0 }, describe(op));
  t.regex(String((op.json.result as { stdout: string }).stdout), /Login Succeeded/);
  t.true(registry in dockerAuths(), JSON.stringify(dockerAuths()));
});

test.serial("registry login - a wrong password ends with a non-zero exit_code", async (t) => {
  const id = await createCredential("bad", WRONG_PASSWORD);
  const res = await call("/registry-auth/login", { body: { server_id: c.serverId, credential_id: id } });
  t.is(res.status, 202, describe(res));
  const op = await waitForOperationEnd(c, String(res.json.operation_id), 30_000);
  answers.push(op.text);
  t.is(op.json.status, "completed", describe(op));
  const result = op.json.result as { exit_code: number; stderr: string };
  t.not(result.exit_code, 0, describe(op));
  t.regex(result.stderr, /401 Unauthorized/, describe(op));
});

test.serial(
  "registry login - unknown or another tenant's credential is 404; not connected is 409",
  async (t) => {
    const unknown = await call("/registry-auth/login", {
      body: { server_id: c.serverId, credential_id: "00000000-0000-4000-8000-000000000000" },
    });
    assertDetailOnly(t, unknown, 404);

    const other = await c.admin(["create-tenant", "--name", `other-${randomBytes(3).toString("hex")}`]);
    const otherKey = String(
      (await c.admin(["create-api-key", "--tenant", String(other.tenant_id), "--name", "k"])).key,
    );
    const theirs = await request(c, "/api/registry-credentials", {
      body: { name: "theirs", registry_url: registry, username: USER, password: PASSWORD },
      key: null,
      headers: { "x-api-key": otherKey },
    });
    t.is(theirs.status, 201, describe(theirs));
    const foreign = await call("/registry-auth/login", {
      body: { server_id: c.serverId, credential_id: theirs.json.id },
    });
    assertDetailOnly(t, foreign, 404);

    const id = await createCredential("for-idle", PASSWORD);
    const idle = await c.addServer({ start: false });
    const res = await call("/registry-auth/login", { body: { server_id: idle.serverId, credential_id: id } });
    t.is(res.status, 409, describe(res));
    t.is(res.json.detail, `server '${idle.serverName}' is not connected`);
  },
);

test.serial("registry logout - synchronous and completed; the login is gone", async (t) => {
  t.true(registry in dockerAuths(), "logged in by an earlier test");
  const res = await call("/registry-auth/logout", {
    body: { server_id: c.serverId, registry_url: `http://${registry}`, run_id: "r-login" },
  });
  t.is(res.status, 200, describe(res));
  t.like(res.json, { status: "completed", exit_code: 0 }, describe(res));
  t.regex(String(res.json.operation_id), UUID);
  t.false(registry in dockerAuths(), JSON.stringify(dockerAuths()));
});

test.serial(
  "registry logout - a server that is not connected is completed with a non-zero exit code",
  async (t) => {
    const idle = await c.addServer({ start: false });
    const res = await call("/registry-auth/logout", {
      body: { server_id: idle.serverId, registry_url: registry },
    });
    t.is(res.status, 200, describe(res));
    t.like(res.json, {
      status: "completed",
      exit_code: -1,
      stderr: `server '${idle.serverName}' is not connected`,
    });
    const op = await waitForOperationEnd(c, String(res.json.operation_id), 5_000);
    t.like(op.json, { operation_type: "registry_logout", status: "completed" }, describe(op));
  },
);

test.serial("registry secrets - the password is in no table, no log, no API answer", async (t) => {
  const dump = await c.db.dumpText();
  t.true(dump.includes("registry_credentials"), "the dump covers the credentials table");
  for (const secret of [PASSWORD, WRONG_PASSWORD]) {
    t.false(dump.includes(secret), "database");
    t.false(c.logText().includes(secret), "control-plane and agent logs");
    t.false(
      answers.some((a) => a.includes(secret)),
      "API answers",
    );
    // The agent's own files (journal, result spool) and the control plane's log files.
    for (const file of filesUnder(c.dir)) {
      t.false(readFileSync(file).includes(secret), file);
    }
  }
});

// The dashboard's API over plain HTTP, the way its pages call it: the web
// session cookie admitted on /api/* as the signed-in person (role, audit,
// tenant scope), the CSRF header on every change, an explicit credential
// header winning over the cookie; and the endpoints the pages need (servers'
// live state, join tokens, API keys, activity, audit chain state, the person's
// own sessions and CLI logins).
import { createHash } from "node:crypto";
import { join } from "node:path";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { assertError, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { pollUntil } from "./harness/wait";
import { type Person, createOwner } from "./harness/people";
import { type Dash, auditEvents, inviteMember, signInDash } from "./harness/dashboard-session";

let c: Cluster;
let owner: Person;
let dash: Dash;

test.before(async () => {
  c = await startCluster();
  owner = await createOwner(c.db.url, c.tenantId);
  dash = await signInDash(c.baseUrl, owner);
});
test.after.always(cleanupAll);

const sha256Hex = (s: string) => createHash("sha256").update(s).digest("hex");

const member = () => inviteMember(dash, "member");

test("dashboard - GET /api/me with the session cookie: the person, the tenant and the CSRF token", async (t) => {
  const me = await dash.call("GET", "/api/me");
  t.is(me.status, 200, describe(me));
  t.is(me.json.type, "user");
  t.like(me.json.user as object, { id: owner.id, email: owner.email, role: "owner" });
  t.deepEqual(me.json.tenant, { id: c.tenantId, name: me.json.tenant_name });
  t.is(me.json.csrf_token, dash.csrf);
  t.regex(dash.csrf, /^[A-Za-z0-9_-]{43}$/);
  // Without a cookie: 401 (the pages then go to /login?next=...).
  assertError(t, await request(c, "/api/me", { key: null }), 401, /X-API-Key/);
  // A header credential's /api/me has no CSRF token.
  const key = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "me-check"]);
  const byKey = await request(c, "/api/me", { key: null, headers: { "x-api-key": String(key.key) } });
  t.is(byKey.json.type, "api_key");
  t.false("csrf_token" in byKey.json);
  t.deepEqual(byKey.json.tenant, me.json.tenant);
});

test("dashboard - a cookie request that changes something without the CSRF header is 403 and changes nothing", async (t) => {
  const name = `csrf-${Date.now()}`;
  assertError(
    t,
    await dash.call("POST", "/api/automation-keys", { name }, { csrf: null }),
    403,
    "missing or invalid X-CSRF-Token header: send the csrf_token of GET /api/me",
  );
  assertError(
    t,
    await dash.call("POST", "/api/automation-keys", { name }, { csrf: "x".repeat(43) }),
    403,
    /CSRF/,
  );
  const list = await dash.call("GET", "/api/automation-keys");
  t.false((list.json.automation_keys as { name: string }[]).some((k) => k.name === name));
  // The refusal is a security event of the person.
  const refused = await auditEvents(c, "auth.refused");
  t.true(refused.some((e) => e.payload.code === "RC_ERR_CSRF" && e.payload.actor.user_id === owner.id));

  // With the header: created, and audited with the person as the actor.
  const created = await dash.call("POST", "/api/automation-keys", { name });
  t.is(created.status, 201, describe(created));
  const ev = (await auditEvents(c, "automation_key.created")).find((e) => e.payload.key_name === name);
  t.like(ev?.payload.actor, { key_type: "user", user_id: owner.id, email: owner.email });
});

test("dashboard - an explicit credential header wins over the cookie, and needs no CSRF token", async (t) => {
  // A bad header with a good cookie: the header is judged (401), not the cookie.
  assertError(
    t,
    await dash.call("GET", "/api/me", undefined, { headers: { "x-api-key": "rck_bogus" } }),
    401,
    "invalid API key",
  );
  assertError(
    t,
    await dash.call("GET", "/api/servers", undefined, { headers: { authorization: `Bearer ${c.key}` } }),
    401,
    /X-API-Key/,
  );
  const key = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "header-wins"]);
  const made = await request(c, "/api/automation-keys", {
    key: null,
    headers: { "x-api-key": String(key.key) },
    body: { name: `by-key-${Date.now()}` },
  });
  t.is(made.status, 201, describe(made));
});

test("dashboard - the cookie is admitted on operation reads of the Automation API, never on its runs", async (t) => {
  const run = await exec(c, { server_id: c.serverId, command: "echo hi", run_id: "dash-read" });
  t.is(run.status, 200, describe(run));
  const one = await dash.call("GET", `/api/automation/v1/operations/${run.json.operation_id}`);
  t.is(one.status, 200, describe(one));
  t.like(one.json.result as object, { exit_code: 0, stdout: "hi\n" });
  const listed = await dash.call("GET", "/api/automation/v1/operations?run_id=dash-read");
  t.is((listed.json.operations as unknown[]).length, 1);
  assertError(
    t,
    await dash.call("POST", "/api/automation/v1/exec", { server_id: c.serverId, command: "true" }),
    401,
    /Authorization/,
  );
});

test("dashboard - a member's cookie may read but not manage credentials; a signed-out cookie is 401", async (t) => {
  const m = await member();
  t.is((await m.call("GET", "/api/servers")).status, 200);
  assertError(
    t,
    await m.call("POST", "/api/automation-keys", { name: "nope" }),
    403,
    "POST /api/automation-keys needs the owner role; you are a deployer",
  );
  const out = await m.browser.post("/logout", { csrf_token: m.csrf });
  t.regex(out.url, /\/login$/);
  m.browser.cookies.set("relayctl_session", m.sessionToken);
  assertError(t, await m.call("GET", "/api/me"), 401, "not signed in: the session has ended, sign in again");
});

interface ServerView {
  id: string;
  name: string;
  connected: boolean;
  agent_version: string | null;
  last_seen_at: string | null;
}

async function servers(): Promise<ServerView[]> {
  const r = await dash.call("GET", "/api/servers");
  if (r.status !== 200) throw new Error(`GET /api/servers: ${describe(r)}`);
  return r.json.servers as ServerView[];
}

test("dashboard - GET /api/servers says which agents hold a stream now, across instances", async (t) => {
  const idle = await c.addServer({ start: false });
  const live = await c.addServer({ start: true });
  const list = await servers();
  t.like(
    list.find((s) => s.id === c.serverId),
    { connected: true, name: c.serverName },
  );
  t.like(
    list.find((s) => s.id === live.serverId),
    { connected: true },
  );
  t.like(
    list.find((s) => s.id === idle.serverId),
    { connected: false, last_seen_at: null },
  );
  t.truthy(list.find((s) => s.id === live.serverId)?.agent_version);
  // The agent dies: its server reads as not connected, though it was seen a moment ago.
  await live.agent!.kill("SIGKILL");
  const after = await pollUntil(
    async () => {
      const s = (await servers()).find((x) => x.id === live.serverId);
      return s && !s.connected ? s : undefined;
    },
    { what: "the killed agent's server to read not connected", timeoutMs: 20_000, intervalMs: 100 },
  );
  t.truthy(after.last_seen_at);
  t.true((await servers()).find((s) => s.id === c.serverId)!.connected);
});

test("dashboard - POST /api/servers/join-tokens: a single-use token and the commands; the enroll command adds the server live", async (t) => {
  const name = `web-${Math.random().toString(36).slice(2, 8)}`;
  const r = await dash.call("POST", "/api/servers/join-tokens", { name });
  t.is(r.status, 201, describe(r));
  const token = String(r.json.token);
  t.regex(token, /^rjt_[0-9A-Za-z]{40}$/);
  t.is(r.json.server_name, name);
  const ttl = Date.parse(String(r.json.expires_at)) - Date.now();
  t.true(ttl > 55 * 60_000 && ttl <= 60 * 60_000, String(r.json.expires_at));
  const pinned = `curl -fsSL ${c.baseUrl}/install.sh | sudo sh -s -- --token ${token} --signing-key `;
  t.true(String(r.json.install_command).startsWith(pinned), String(r.json.install_command));
  t.regex(String(r.json.install_command).slice(pinned.length), /^MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=$/);
  t.is(r.json.enroll_command, `relayctl-agent enroll --url ${c.baseUrl} --token ${token}`);
  // Stored as its hash only; audited with the person as the actor, never the token.
  t.deepEqual(
    await c.db
      .query("SELECT id FROM join_tokens WHERE token_hash = ?", [sha256Hex(token)])
      .then((x) => x.length),
    1,
  );
  const ev = (await auditEvents(c, "join_token.created")).find((e) => e.payload.server_name === name);
  t.like(ev?.payload.actor, { key_type: "user", user_id: owner.id });
  t.false(JSON.stringify(ev).includes(token));

  // The enroll command, as shown, enrolls the agent; once it runs, the server is listed connected.
  const args = String(r.json.enroll_command).split(" ");
  const stateDir = join(c.dir, `agent-${name}`);
  const enrolled = await enroll(
    args[args.indexOf("--url") + 1]!,
    args[args.indexOf("--token") + 1]!,
    stateDir,
  );
  t.is(enrolled.server_name, name);
  t.like(
    (await servers()).find((s) => s.id === enrolled.server_id),
    { connected: false },
  );
  await new Agent(stateDir, c.dir).start();
  await pollUntil(async () => (await servers()).find((s) => s.id === enrolled.server_id && s.connected), {
    what: "the new server to read connected",
    timeoutMs: 20_000,
    intervalMs: 100,
  });
  // Single use.
  await t.throwsAsync(enroll(c.baseUrl, token, join(c.dir, "again")), { message: /join token is invalid/ });
});

test("dashboard - join tokens: a name is optional, a bad one is 422, a member may not make one", async (t) => {
  const r = await dash.call("POST", "/api/servers/join-tokens", {});
  t.is(r.status, 201, describe(r));
  t.regex(String(r.json.server_name), /^server-[0-9a-f]{6}$/);
  assertError(t, await dash.call("POST", "/api/servers/join-tokens", { name: "no spaces" }), 422, /^name: /);
  const m = await member();
  assertError(
    t,
    await m.call("POST", "/api/servers/join-tokens", {}),
    403,
    "POST /api/servers/join-tokens needs the owner role; you are a deployer",
  );
});

test("dashboard - API keys: created with the secret once, listed without it, revoked at once", async (t) => {
  const name = `ci-${Math.random().toString(36).slice(2, 8)}`;
  const made = await dash.call("POST", "/api/api-keys", { name });
  t.is(made.status, 201, describe(made));
  t.deepEqual(Object.keys(made.json).sort(), ["created_at", "id", "key", "name"]);
  const key = String(made.json.key);
  t.regex(key, /^rck_[0-9A-Za-z]{40}$/);
  const listed = (await dash.call("GET", "/api/api-keys")).json.api_keys as Record<string, unknown>[];
  const entry = listed.find((k) => k.id === made.json.id);
  // Not used yet (issue 31: keys show when they were last used).
  t.deepEqual(entry, { id: made.json.id, name, created_at: made.json.created_at, last_used_at: null });
  t.false(JSON.stringify(listed).includes(key));
  const byKey = () => request(c, "/api/servers", { key: null, headers: { "x-api-key": key } });
  t.is((await byKey()).status, 200);
  t.like((await auditEvents(c, "api_key.created")).find((e) => e.key_id === made.json.id)?.payload.actor, {
    key_type: "user",
    user_id: owner.id,
  });

  const del = await dash.call("DELETE", `/api/api-keys/${made.json.id}`);
  t.is(del.status, 204, describe(del));
  assertError(t, await byKey(), 401, "API key has been revoked");
  t.false(
    ((await dash.call("GET", "/api/api-keys")).json.api_keys as { id: string }[]).some(
      (k) => k.id === made.json.id,
    ),
  );
  assertError(
    t,
    await dash.call("DELETE", `/api/api-keys/${made.json.id}`),
    404,
    `API key '${made.json.id}' not found`,
  );
  t.like((await auditEvents(c, "api_key.revoked")).find((e) => e.key_id === made.json.id)?.payload.actor, {
    user_id: owner.id,
  });
});

test("dashboard - API keys: another tenant's id is 404, a member may list but not create or revoke", async (t) => {
  const other = await c.admin(["create-tenant", "--name", `other-${Date.now()}`]);
  const theirs = await c.admin(["create-api-key", "--tenant", String(other.tenant_id), "--name", "theirs"]);
  assertError(t, await dash.call("DELETE", `/api/api-keys/${theirs.key_id}`), 404, /not found/);
  assertError(t, await dash.call("DELETE", "/api/api-keys/not-a-uuid"), 404, /not found/);
  t.is(
    (await request(c, "/api/me", { key: null, headers: { "x-api-key": String(theirs.key) } })).status,
    200,
  );
  assertError(t, await dash.call("POST", "/api/api-keys", { name: "" }), 422, /^name: /);
  assertError(t, await dash.call("POST", "/api/api-keys", { name: "x" }, { csrf: null }), 403, /CSRF/);

  const m = await member();
  t.is((await m.call("GET", "/api/api-keys")).status, 200);
  assertError(t, await m.call("POST", "/api/api-keys", { name: "m" }), 403, /needs the owner role/);
  const mine = await dash.call("POST", "/api/api-keys", { name: "kept" });
  assertError(t, await m.call("DELETE", `/api/api-keys/${mine.json.id}`), 403, /needs the owner role/);
});

test("dashboard - a deploy from the pages is trigger dashboard, by the person; another tenant's path is 404", async (t) => {
  const app = await dash.call("POST", "/api/applications", {
    name: `shop-${Math.random().toString(36).slice(2, 8)}`,
    server_id: c.serverId,
    linked_container_name: "shop-web",
    container_port: 8080,
    git_repository: join(c.dir, "no-such-repo"),
  });
  t.is(app.status, 201, describe(app));
  const base = `/api/tenants/${c.tenantId}/applications/${app.json.id}`;
  assertError(t, await dash.call("POST", `${base}/deploy`, {}, { csrf: null }), 403, /CSRF/);
  const d = await dash.call("POST", `${base}/deploy`, {});
  t.is(d.status, 202, describe(d));
  const history = await dash.call("GET", `${base}/deployments`);
  t.like((history.json.deployments as unknown[])[0], {
    deployment_id: d.json.deployment_id,
    trigger: "dashboard",
    triggered_by: { type: "user", id: owner.id, name: owner.email },
  });
  assertError(
    t,
    await dash.call(
      "GET",
      `/api/tenants/00000000-0000-4000-8000-000000000000/applications/${app.json.id}/deployments`,
    ),
    404,
    /tenant '.*' not found/,
  );
});

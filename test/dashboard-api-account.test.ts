// The dashboard's API, second part (see dashboard-api.test.ts for admission):
// the Activity page (runs, operations, the audit chain's state) and the Account
// page (the person's own web sessions and CLI/MCP logins, each revocable).
import test from "ava";
import { assertError, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { type Person, createOwner, deviceTokens, postForm } from "./harness/people";
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

test("dashboard - GET /api/runs and /api/operations: CI runs newest first, their operations with context, command and server", async (t) => {
  const runId = `ci-${Date.now()}`;
  const ctx = {
    provider: "github",
    repository: "acme/shop",
    workflow: "deploy",
    actor: "octo",
    sha: "abc123",
  };
  const idle = await c.addServer({ start: false });
  t.is(
    (await exec(c, { server_id: c.serverId, command: "echo one", run_id: runId, run_context: ctx })).status,
    200,
  );
  t.is(
    (await exec(c, { server_id: c.serverId, command: "exit 3", run_id: runId, run_context: ctx })).status,
    200,
  );
  t.is(
    (await exec(c, { server_id: idle.serverId, command: "true", run_id: runId, run_context: ctx })).status,
    409,
  );
  t.is((await exec(c, { server_id: c.serverId, command: "echo no-run" })).status, 200);
  const laterRun = `${runId}-later`;
  t.is((await exec(c, { server_id: c.serverId, command: "echo later", run_id: laterRun })).status, 200);

  const runs = await dash.call("GET", "/api/runs");
  t.is(runs.status, 200, describe(runs));
  const list = runs.json.runs as Record<string, unknown>[];
  t.true(
    list.every((r) => typeof r.run_id === "string"),
    "operations without run_id are not runs",
  );
  const ids = list.map((r) => r.run_id);
  t.true(ids.indexOf(laterRun) < ids.indexOf(runId), "newest first");
  const run = list.find((r) => r.run_id === runId)!;
  t.like(run, {
    operations: 3,
    run_context: ctx,
    statuses: { completed: 2, failed: 1, running: 0, timeout: 0 },
  });
  t.true(Date.parse(String(run.first_at)) <= Date.parse(String(run.last_at)));
  // Pages of one, cursor to cursor, give the same list.
  const paged: unknown[] = [];
  let cursor: unknown = null;
  do {
    const page = await dash.call("GET", `/api/runs?limit=1${cursor ? `&cursor=${cursor}` : ""}`);
    paged.push(...(page.json.runs as { run_id: string }[]).map((r) => r.run_id));
    cursor = page.json.next_cursor;
  } while (cursor && paged.length <= ids.length);
  t.deepEqual(paged.slice(0, ids.indexOf(runId) + 1), ids.slice(0, ids.indexOf(runId) + 1));

  const ops = await dash.call("GET", `/api/operations?run_id=${runId}`);
  t.is(ops.status, 200, describe(ops));
  const o = ops.json.operations as Record<string, unknown>[];
  t.deepEqual(
    o.map((x) => x.command),
    ["true", "exit 3", "echo one"],
  );
  t.like(o[2], {
    operation_type: "exec",
    server_id: c.serverId,
    server_name: c.serverName,
    status: "completed",
    run_id: runId,
    run_context: ctx,
    result: { exit_code: 0, stdout: "one\n", stdout_truncated: false },
  });
  t.like(o[0], { status: "failed", server_id: idle.serverId });
  const failed = await dash.call("GET", `/api/operations?run_id=${runId}&status=failed`);
  t.deepEqual(
    (failed.json.operations as { server_id: string }[]).map((x) => x.server_id),
    [idle.serverId],
  );
  const onServer = await dash.call("GET", `/api/operations?server_id=${idle.serverId}&operation_type=exec`);
  t.is((onServer.json.operations as unknown[]).length, 1);
  const page1 = await dash.call("GET", `/api/operations?run_id=${runId}&limit=2`);
  const page2 = await dash.call(
    "GET",
    `/api/operations?run_id=${runId}&limit=2&cursor=${page1.json.next_cursor}`,
  );
  t.deepEqual(
    [
      ...(page1.json.operations as { command: string }[]),
      ...(page2.json.operations as { command: string }[]),
    ].map((x) => x.command),
    ["true", "exit 3", "echo one"],
  );
  t.is(page2.json.next_cursor, null);

  // Another tenant sees none of it.
  const other = await c.admin(["create-tenant", "--name", `other-${Date.now()}`]);
  const theirs = await c.admin(["create-api-key", "--tenant", String(other.tenant_id), "--name", "theirs"]);
  const asOther = (path: string) =>
    request(c, path, { key: null, headers: { "x-api-key": String(theirs.key) } });
  t.deepEqual((await asOther("/api/runs")).json.runs, []);
  t.deepEqual((await asOther(`/api/operations?run_id=${runId}`)).json.operations, []);
});

test("dashboard - activity listings refuse bad filters with 422", async (t) => {
  assertError(t, await dash.call("GET", "/api/operations?status=bogus"), 422, /^status: /);
  assertError(t, await dash.call("GET", "/api/operations?limit=0"), 422, /^limit: /);
  assertError(t, await dash.call("GET", "/api/operations?server_id=nope"), 422, /^server_id: /);
  assertError(t, await dash.call("GET", "/api/operations?cursor=x"), 422, /^cursor: /);
  assertError(
    t,
    await dash.call("GET", "/api/runs?cursor=bm90LWpzb24"),
    422,
    "cursor: must be a cursor from next_cursor",
  );
  assertError(t, await dash.call("GET", "/api/runs?limit=201"), 422, /^limit: /);
});

test("dashboard - GET /api/audit/verify: the tenant's chain state, and an edited event found", async (t) => {
  const ok = await dash.call("GET", "/api/audit/verify");
  t.is(ok.status, 200, describe(ok));
  t.is(ok.json.ok, true);
  t.true(Number(ok.json.events) >= 3);
  t.is(ok.json.head_seq, ok.json.events);
  t.false("detail" in ok.json);

  // A tenant of its own, so the edit breaks no other test's chain.
  const other = await c.admin(["create-tenant", "--name", `audited-${Date.now()}`]);
  const key = await c.admin(["create-api-key", "--tenant", String(other.tenant_id), "--name", "verifier"]);
  await c.admin(["create-api-key", "--tenant", String(other.tenant_id), "--name", "second"]);
  const verify = () =>
    request(c, "/api/audit/verify", { key: null, headers: { "x-api-key": String(key.key) } });
  t.like((await verify()).json, { ok: true, events: 2, head_seq: 2 });
  await c.db.query(
    "UPDATE audit_events SET payload = REPLACE(payload, 'second', 'forged') WHERE tenant_id = ? AND seq = 2",
    [other.tenant_id],
  );
  const broken = await verify();
  t.is(broken.status, 200);
  t.like(broken.json, { ok: false, events: 1, head_seq: 2 });
  t.regex(String(broken.json.detail), /^event 2: contents do not match its hash/);
});

interface SessionView {
  id: string;
  created_at: string;
  expires_at: string;
  ip: string | null;
  current: boolean;
}

test("dashboard - GET/DELETE /api/me/sessions: the person's sign-ins, each revocable at once", async (t) => {
  const other = await signInDash(c.baseUrl, owner);
  const listed = await dash.call("GET", "/api/me/sessions");
  t.is(listed.status, 200, describe(listed));
  const sessions = listed.json.sessions as SessionView[];
  t.true(sessions.length >= 2);
  t.is(sessions.filter((s) => s.current).length, 1);
  const mine = sessions.find((s) => s.current)!;
  t.is(mine.ip, "127.0.0.1");
  t.true(Date.parse(mine.expires_at) > Date.parse(mine.created_at));
  // The other session: the one `other` sees as current.
  const otherId = ((await other.call("GET", "/api/me/sessions")).json.sessions as SessionView[]).find(
    (s) => s.current,
  )!.id;
  t.not(otherId, mine.id);
  // Without the CSRF header nothing ends.
  assertError(
    t,
    await dash.call("DELETE", `/api/me/sessions/${otherId}`, undefined, { csrf: null }),
    403,
    /CSRF/,
  );
  t.is((await other.call("GET", "/api/me")).status, 200);
  t.is((await dash.call("DELETE", `/api/me/sessions/${otherId}`)).status, 204);
  assertError(t, await other.call("GET", "/api/me"), 401, /not signed in/);
  assertError(
    t,
    await dash.call("DELETE", `/api/me/sessions/${otherId}`),
    404,
    `session '${otherId}' not found`,
  );
  t.like(
    (await auditEvents(c, "auth.session_revoked")).find((e) => e.payload.session_id === otherId)?.payload,
    {
      current: false,
      actor: { user_id: owner.id },
    },
  );

  // Another person's session is not yours to end; your own current one signs you out.
  const m = await inviteMember(dash, "member");
  const memberSession = ((await m.call("GET", "/api/me/sessions")).json.sessions as SessionView[])[0]!;
  assertError(t, await dash.call("DELETE", `/api/me/sessions/${memberSession.id}`), 404, /not found/);
  const bye = await m.call("DELETE", `/api/me/sessions/${memberSession.id}`);
  t.is(bye.status, 204);
  t.true(bye.headers.getSetCookie().some((x) => /^relayctl_session=; .*Max-Age=0/.test(x)));
  assertError(t, await m.call("GET", "/api/me"), 401, /not signed in/);
});

test("dashboard - GET/DELETE /api/me/grants: CLI logins listed by family, one revocation ends them all", async (t) => {
  const first = await deviceTokens(c.baseUrl, dash.browser);
  const second = await deviceTokens(c.baseUrl, dash.browser);
  const listed = await dash.call("GET", "/api/me/grants");
  t.is(listed.status, 200, describe(listed));
  const grants = listed.json.grants as Record<string, string>[];
  t.true(grants.length >= 2);
  t.like(grants[0], { client_id: "relayctl-cli", client_name: "relayctl command-line client" });
  // Which family is `first`'s: the one whose revocation stops its token.
  const family = (
    await c.db.query("SELECT family_id FROM oauth_tokens WHERE token_hash = SHA2(?, 256)", [
      first.access_token,
    ])
  )[0]!.family_id as string;
  t.true(grants.some((g) => g.id === family));
  const asToken = (token: string) => request(c, "/api/me", { key: token });
  t.is((await asToken(first.access_token)).status, 200);

  // A member cannot see or end the owner's logins.
  const m = await inviteMember(dash, "member");
  assertError(t, await m.call("DELETE", `/api/me/grants/${family}`), 404, /not found/);
  t.is((await dash.call("DELETE", `/api/me/grants/${family}`)).status, 204);
  assertError(t, await asToken(first.access_token), 401, /revoked/);
  const refresh = await postForm(c.baseUrl, "/oauth/token", {
    grant_type: "refresh_token",
    refresh_token: first.refresh_token,
    client_id: "relayctl-cli",
  });
  t.is(refresh.status, 400);
  t.is(refresh.json.error, "invalid_grant");
  // The other login is untouched.
  t.is((await asToken(second.access_token)).status, 200);
  t.false(
    ((await dash.call("GET", "/api/me/grants")).json.grants as { id: string }[]).some((g) => g.id === family),
  );
  assertError(t, await dash.call("DELETE", `/api/me/grants/${family}`), 404, /not found/);
  t.like((await auditEvents(c, "oauth.grant_revoked")).find((e) => e.payload.family_id === family)?.payload, {
    client_id: "relayctl-cli",
    tokens_revoked: 2,
    actor: { user_id: owner.id },
  });
  // An OAuth token of the person may manage them too; an API key is no person.
  t.is((await request(c, "/api/me/grants", { key: second.access_token })).status, 200);
  const key = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "not-a-person"]);
  assertError(
    t,
    await request(c, "/api/me/sessions", { key: null, headers: { "x-api-key": String(key.key) } }),
    403,
    "this is about a signed-in person: use the session or an OAuth token, not an API key",
  );
});

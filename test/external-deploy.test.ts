// External deploy through a real Caddy: sessions, sync and its statuses (synced,
// noop, drift_recovered, conflict, two sessions racing, several applications in one
// job), deletion, audit. The pipeline's containers are real podman containers (the
// agent checks with the engine that a container serves the port before it writes a
// route); every route is checked by sending HTTP through Caddy with `Host: <fqdn>`
// to the container port it publishes. What sessions, syncs and the application API
// refuse: external-deploy-refusals.test.ts (set-up shared in harness/external-deploy.ts).
import test from "ava";
import { ISO_UTC, UUID, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type WebContainer, startWebContainer } from "./harness/containers";
import { caddyConfig, entry, s, session, startExternalDeployStack } from "./harness/external-deploy";
import { request } from "./harness/http";
import { proxyGet, waitForBackend } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

// The pipeline's containers: web-1 serves "backend one/two/three" on three published ports.
let web1: WebContainer;
let race1: WebContainer;
let api1: WebContainer;
let docs1: WebContainer;
let gone1: WebContainer;

test.before(async () => {
  await startExternalDeployStack();
  [web1, race1, api1, docs1, gone1] = await Promise.all([
    startWebContainer("web-1", ["one", "two", "three"]),
    startWebContainer("race-1", ["one"]),
    startWebContainer("api-1", ["one"]),
    startWebContainer("docs-1", ["two"]),
    startWebContainer("gone-1", ["one"]),
  ]);
});
test.after.always(cleanupAll);

function only(res: { json: Record<string, unknown> }) {
  const results = res.json.results as Record<string, unknown>[];
  return results[0]!;
}

let web: { id: string };
let s1: { id: string; token: string };

test.serial(
  "session - 201 with an rds_ token, the matched applications and the unmatched names",
  async (t) => {
    web = await s.createApplication({
      name: "web",
      linked_container_name: web1.name,
      container_port: 8080,
      fqdns: ["Web.Example.test", "www.example.test"],
    });
    const res = await s.openSession({
      container_names: [web1.name, "sidecar"],
      workflow_run_id: "run-4711",
      commit_sha: "0123456789abcdef0123456789abcdef01234567",
    });
    t.is(res.status, 201, describe(res));
    t.regex(String(res.json.session_id), UUID);
    t.regex(String(res.json.session_token), /^rds_[0-9A-Za-z]{40}$/);
    t.regex(String(res.json.expires_at), ISO_UTC);
    t.true(Date.parse(String(res.json.expires_at)) > Date.now() + 60_000);
    t.deepEqual(res.json.applications, [
      {
        id: web.id,
        linked_container_name: web1.name,
        container_port: 8080,
        bound_fqdns: ["web.example.test", "www.example.test"],
      },
    ]);
    t.deepEqual(res.json.unmatched, ["sidecar"]);
    s1 = { id: String(res.json.session_id), token: String(res.json.session_token) };
    // Stored only as its hash.
    const rows = await s.c.db.query(
      "SELECT token_hash, workflow_run_id, commit_sha FROM external_deploy_sessions WHERE id = ?",
      [s1.id],
    );
    t.not(rows[0]!.token_hash, s1.token);
    t.false((await s.c.db.dumpText()).includes(s1.token));
    t.is(rows[0]!.workflow_run_id, "run-4711");
  },
);

test.serial(
  "session - 403 without external_deploy, 400 when nothing matches, 422 for a bad body, 401 for bad keys",
  async (t) => {
    const created = await s.manage("/automation-keys", { body: { name: "exec-only", operations: ["exec"] } });
    t.is(created.status, 201, describe(created));
    const execOnly = String(created.json.key);
    assertDetailOnly(t, await s.openSession({ container_names: [web1.name] }, execOnly), 403);
    const none = assertDetailOnly(t, await s.openSession({ container_names: ["nothing-here"] }), 400);
    t.regex(none, /linked_container_name/);
    for (const body of [
      {},
      { container_names: [] },
      { container_names: "web-1" },
      { container_names: ["a b"] },
      { container_names: [web1.name], extra: 1 },
    ]) {
      assertDetailOnly(t, await s.openSession(body), 422);
    }
    assertDetailOnly(t, await s.openSession({ container_names: [web1.name] }, `rk_t_${"x".repeat(30)}`), 401);
    assertDetailOnly(t, await s.openSession({ container_names: [web1.name] }, null), 401);
  },
);

test.serial("sync - synced: Caddy routes the application's domains to the container port", async (t) => {
  const res = await s.sync(s1.token, [entry(web1.name, web1.hostPort("one"))]);
  t.is(res.status, 200, describe(res));
  t.is(res.json.session_id, s1.id);
  t.deepEqual(res.json.errors, []);
  const r = only(res);
  t.is(r.application_id, web.id);
  t.is(r.container_name, web1.name);
  t.is(r.status, "synced", describe(res));
  t.regex(String(r.signature_hash), /^sha256:[0-9a-f]{64}$/);
  t.deepEqual(r.synced_fqdns, ["web.example.test", "www.example.test"]);
  t.false("reason" in r);
  await waitForBackend(s.proxyPort, "web.example.test", "one", 10_000);
  await waitForBackend(s.proxyPort, "www.example.test", "one", 10_000);
  t.is((await proxyGet(s.proxyPort, "unknown.example.test")).status, 404);
});

test.serial(
  "sync - a changed port is synced and traffic moves; the same request again is a noop",
  async (t) => {
    const moved = await s.sync(s1.token, [entry(web1.name, web1.hostPort("two"))]);
    t.is(only(moved).status, "synced", describe(moved));
    await waitForBackend(s.proxyPort, "web.example.test", "two", 10_000);
    const again = await s.sync(s1.token, [entry(web1.name, web1.hostPort("two"))]);
    t.is(only(again).status, "noop", describe(again));
    t.is(only(again).signature_hash, only(moved).signature_hash);
    const retagged = await s.sync(s1.token, [
      entry(web1.name, web1.hostPort("two"), { image_tag: "registry.example.test/web:1.0.1" }),
    ]);
    t.is(only(retagged).status, "synced", "a new image tag is a new signature");
    t.not(only(retagged).signature_hash, only(moved).signature_hash);
  },
);

test.serial("sync - a route deleted behind the agent's back is re-applied as drift_recovered", async (t) => {
  const del = await s.caddy!.admin("DELETE", `/id/relayctl-app-${web.id}`);
  t.is(del.status, 200, del.text);
  t.is((await proxyGet(s.proxyPort, "web.example.test")).status, 404);
  const res = await s.sync(s1.token, [
    entry(web1.name, web1.hostPort("two"), { image_tag: "registry.example.test/web:1.0.1" }),
  ]);
  t.is(only(res).status, "drift_recovered", describe(res));
  await waitForBackend(s.proxyPort, "web.example.test", "two", 10_000);
});

// The agent writes only when Caddy does not serve a route as it would write it. Any write
// replaces the whole relayctl server, catch-all included, so a mark put on the catch-all out of
// band survives exactly as long as Caddy is not written to.
const MARK = "marked out of band\n";
const marked = async () => (await caddyConfig()).includes(JSON.stringify(MARK).slice(1, -1));

test.serial("sync - an unchanged sync makes no Caddy write", async (t) => {
  const mark = await s.caddy!.admin("PATCH", "/id/relayctl-catchall/handle/0/body", MARK);
  t.is(mark.status, 200, mark.text);
  t.true(await marked());
  const res = await s.sync(s1.token, [
    entry(web1.name, web1.hostPort("two"), { image_tag: "registry.example.test/web:1.0.1" }),
  ]);
  t.is(only(res).status, "noop", describe(res));
  t.true(await marked(), "Caddy's config was rewritten by a sync that changed nothing");
});

test.serial("sync - a route changed behind the agent's back is re-applied as drift_recovered", async (t) => {
  t.true(await marked(), "the previous test's mark is still there");
  const dial = `/id/relayctl-app-${web.id}/handle/0/upstreams/0/dial`;
  const edit = await s.caddy!.admin("PATCH", dial, `127.0.0.1:${web1.hostPort("one")}`);
  t.is(edit.status, 200, edit.text);
  await waitForBackend(s.proxyPort, "web.example.test", "one", 10_000);
  const res = await s.sync(s1.token, [
    entry(web1.name, web1.hostPort("two"), { image_tag: "registry.example.test/web:1.0.1" }),
  ]);
  t.is(only(res).status, "drift_recovered", describe(res));
  await waitForBackend(s.proxyPort, "web.example.test", "two", 10_000);
  t.false(await marked(), "the re-apply was a write of the server");
});

test.serial("sync - Caddy restarted with its config gone is drift_recovered", async (t) => {
  await s.caddy!.restart();
  t.false((await caddyConfig()).includes(web.id));
  const res = await s.sync(s1.token, [
    entry(web1.name, web1.hostPort("two"), { image_tag: "registry.example.test/web:1.0.1" }),
  ]);
  t.is(only(res).status, "drift_recovered", describe(res));
  await waitForBackend(s.proxyPort, "web.example.test", "two", 10_000);
});

test.serial("sync - another session within 30 s gets conflict naming the session; force syncs", async (t) => {
  const s2 = await session([web1.name]);
  const res = await s.sync(s2.token, [entry(web1.name, web1.hostPort("three"))]);
  t.is(res.status, 200, describe(res));
  const r = only(res);
  t.is(r.status, "conflict", describe(res));
  t.regex(String(r.reason), new RegExp(s1.id));
  t.regex(String(r.reason), /\d{4}-\d{2}-\d{2}T/);
  t.regex(String(r.reason), /force/);
  t.is((await proxyGet(s.proxyPort, "web.example.test")).body, "backend two", "a conflict changes nothing");
  const forced = await s.sync(s2.token, [entry(web1.name, web1.hostPort("three"), { force: true })]);
  t.is(only(forced).status, "synced", describe(forced));
  await waitForBackend(s.proxyPort, "web.example.test", "three", 10_000);
  // Now s1 is the other session.
  const back = await s.sync(s1.token, [entry(web1.name, web1.hostPort("one"))]);
  t.is(only(back).status, "conflict", describe(back));
  t.regex(String(only(back).reason), new RegExp(s2.id));
  await s.deleteSession(s2.id, s2.token);
});

test.serial(
  "sync - two sessions racing for one application: exactly one syncs, the other gets conflict",
  async (t) => {
    await s.createApplication({
      name: "race",
      linked_container_name: race1.name,
      container_port: 7200,
      fqdns: ["race.example.test"],
    });
    const [a, b] = [await session([race1.name]), await session([race1.name])];
    const answers = await Promise.all(
      [a, b].map((x) => s.sync(x.token, [entry(race1.name, race1.hostPort("one"))])),
    );
    const got = answers.map((res) => String(only(res).status)).sort();
    t.deepEqual(got, ["conflict", "synced"], answers.map(describe).join("\n"));
  },
);

test.serial("sync - several applications of one server go to its agent as one job", async (t) => {
  await s.createApplication({
    name: "api",
    linked_container_name: api1.name,
    container_port: 7000,
    fqdns: ["api.example.test"],
  });
  await s.createApplication({
    name: "docs",
    linked_container_name: docs1.name,
    container_port: 7001,
    fqdns: ["*.docs.example.test"],
  });
  const sess = await session([api1.name, docs1.name], { workflow_run_id: "run-batch-1" });
  const res = await s.sync(sess.token, [
    entry(api1.name, api1.hostPort("one")),
    entry(docs1.name, docs1.hostPort("two")),
  ]);
  t.deepEqual(
    (res.json.results as { status: string }[]).map((r) => r.status),
    ["synced", "synced"],
    describe(res),
  );
  await waitForBackend(s.proxyPort, "api.example.test", "one", 10_000);
  await waitForBackend(s.proxyPort, "v2.docs.example.test", "two", 10_000);
  const ops = await request(s.c, "/api/automation/v1/operations?run_id=run-batch-1");
  const list = ops.json.operations as { operation_type: string; status: string }[];
  t.deepEqual(
    list.map((o) => [o.operation_type, o.status]),
    [["route_sync", "completed"]],
    describe(ops),
  );
});

test.serial("applications - deleting one removes its route from the proxy", async (t) => {
  const gone = await s.createApplication({
    name: "gone",
    linked_container_name: gone1.name,
    container_port: 7100,
    fqdns: ["gone.example.test"],
  });
  const sess = await session([gone1.name]);
  t.is(only(await s.sync(sess.token, [entry(gone1.name, gone1.hostPort("one"))])).status, "synced");
  await waitForBackend(s.proxyPort, "gone.example.test", "one", 10_000);
  const del = await s.manage(`/applications/${gone.id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  await pollUntil(
    async () => ((await proxyGet(s.proxyPort, "gone.example.test")).status === 404 ? true : undefined),
    {
      what: "the deleted application's route to leave Caddy",
      timeoutMs: 10_000,
    },
  );
  t.false((await caddyConfig()).includes(gone.id));
  t.is((await proxyGet(s.proxyPort, "web.example.test")).status, 200, "other routes stay");
  assertDetailOnly(t, await s.manage(`/applications/${gone.id}`), 404);
});

test.serial(
  "audit - sessions, each sync entry and deletions are in the trail with their CI context",
  async (t) => {
    const res = await s.manage("/audit?limit=1000");
    const events = res.json.events as {
      seq: number;
      event_type: string;
      operation_id: string | null;
      payload: Record<string, unknown>;
    }[];
    const created = events.find(
      (e) => e.event_type === "external_deploy.session_created" && e.payload.session_id === s1.id,
    );
    t.is(created?.payload.workflow_run_id, "run-4711");
    t.is(created?.payload.commit_sha, "0123456789abcdef0123456789abcdef01234567");
    // One event per server a sync touched, each entry of that server with its outcome.
    const syncs = events.filter(
      (e) => e.event_type === "external_deploy.sync" && e.payload.session_id === s1.id,
    );
    const entries = syncs.flatMap((e) => e.payload.entries as Record<string, unknown>[]);
    const outcomes = entries.map((e) => e.outcome);
    for (const o of ["synced", "noop", "drift_recovered", "conflict"])
      t.true(outcomes.includes(o), `${o} in ${outcomes}`);
    t.true(syncs.every((e) => e.payload.commit_sha === "0123456789abcdef0123456789abcdef01234567"));
    t.true(syncs.every((e) => e.payload.workflow_run_id === "run-4711"));
    t.true(entries.every((e) => typeof e.container_name === "string" && typeof e.image_tag === "string"));
    const carried = syncs.filter((e) => e.payload.operation_id);
    t.true(carried.length > 0 && carried.every((e) => e.payload.server_id === s.c.serverId));
    // Settled with the operation's completion, in its commit: chained right behind its event.
    const all = events as { seq: number; event_type: string; operation_id: string | null }[];
    for (const e of carried as unknown as { seq: number; operation_id: string }[]) {
      const completed = all.find(
        (c) => c.event_type === "operation.completed" && c.operation_id === e.operation_id,
      );
      t.is(completed?.seq, e.seq - 1);
    }
    t.false(events.some((e) => e.event_type === "external_deploy.sync_entry"));
    t.true(events.some((e) => e.event_type === "external_deploy.session_deleted"));
    t.true(events.some((e) => e.event_type === "application.deleted"));
    t.true(events.some((e) => e.event_type === "operation.route_sync"));
    // Sync entries are appended as one batch per request: the hash chain still verifies.
    const verified = await s.c.admin(["audit", "verify", "--tenant", s.c.tenantId]);
    t.true(verified.ok, JSON.stringify(verified));
  },
);

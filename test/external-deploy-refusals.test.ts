// What external deploy refuses, through a real Caddy (set-up shared with external-deploy.test.ts
// in harness/external-deploy.ts): sync entries outside the session or for a server whose agent is
// not connected, a bad sync body, a deleted or expired session or a token that is not one, a
// session deleted with another tenant's key, and applications with a bad FQDN, port or container
// name or a domain taken on the server; none of it reaches the proxy. The application `web` (on
// the podman container web-1) is created before the tests, as external-deploy.test.ts's first
// test creates it.
import test from "ava";
import { assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type WebContainer, startWebContainer } from "./harness/containers";
import { caddyConfig, entry, s, session, startExternalDeployStack } from "./harness/external-deploy";

// web-1 serves "backend one/two/three" on three published ports.
let web1: WebContainer;
let web: { id: string };

test.before(async () => {
  await startExternalDeployStack();
  web1 = await startWebContainer("web-1", ["one", "two", "three"]);
  web = await s.createApplication({
    name: "web",
    linked_container_name: web1.name,
    container_port: 8080,
    fqdns: ["Web.Example.test", "www.example.test"],
  });
});
test.after.always(cleanupAll);

test.serial(
  "sync - entries outside the session and servers whose agent is not connected are errors",
  async (t) => {
    const offline = await s.c.addServer({ start: false });
    const worker = await s.createApplication({
      name: "worker",
      linked_container_name: "worker-1",
      container_port: 9000,
      fqdns: ["worker.example.test"],
      server_id: offline.serverId,
    });
    const sess = await session(["worker-1"]);
    const res = await s.sync(sess.token, [entry("worker-1", 9000), entry(web1.name, web1.hostPort("one"))]);
    t.is(res.status, 200, describe(res));
    t.deepEqual(res.json.results, []);
    const errors = res.json.errors as Record<string, unknown>[];
    t.is(errors.length, 2, describe(res));
    t.is(errors[0]!.container_name, "worker-1");
    t.regex(String(errors[0]!.reason), /not connected/);
    t.is(errors[1]!.container_name, web1.name);
    t.regex(String(errors[1]!.reason), /not in this session/);
    // The failed attempt did not take the conflict guard: a forced-free retry by another session may go.
    const rows = await s.c.db.query(
      "SELECT last_session_id FROM application_route_state WHERE application_id = ?",
      [worker.id],
    );
    t.not(rows[0]?.last_session_id, sess.id);
    // No completion settled these (not connected; not in the session): the api stored them, one event
    // for the server that was asked and one for the entry that reached no server.
    const audit = await s.manage("/audit?limit=1000");
    const syncs = (
      audit.json.events as {
        event_type: string;
        server_id: string | null;
        payload: Record<string, unknown>;
      }[]
    ).filter((e) => e.event_type === "external_deploy.sync" && e.payload.session_id === sess.id);
    const entriesOf = (serverId: string | null) =>
      (
        syncs.find((e) => e.server_id === serverId)?.payload.entries as Record<string, unknown>[] | undefined
      )?.map((x) => [x.container_name, x.outcome]);
    t.is(syncs.length, 2);
    t.deepEqual(entriesOf(offline.serverId), [["worker-1", "error"]]);
    t.deepEqual(entriesOf(null), [[web1.name, "error"]]);
  },
);

test.serial(
  "sync - 422 for a bad body, 401 for a deleted or expired session or a non-rds token",
  async (t) => {
    const sess = await session([web1.name]);
    for (const deployments of [
      [],
      [{ container_name: web1.name }],
      [entry(web1.name, 0)],
      [entry(web1.name, 70000)],
      [entry(web1.name, 80, { force: "yes" })],
    ]) {
      assertDetailOnly(t, await s.sync(sess.token, deployments as Record<string, unknown>[]), 422);
    }
    assertDetailOnly(t, await s.sync(s.c.key, [entry(web1.name, 80)]), 401);
    assertDetailOnly(t, await s.sync(`rds_${"A".repeat(40)}`, [entry(web1.name, 80)]), 401);
    await s.c.db.query("UPDATE external_deploy_sessions SET expires_at = ? WHERE id = ?", [
      Date.now() - 1,
      sess.id,
    ]);
    t.regex(assertDetailOnly(t, await s.sync(sess.token, [entry(web1.name, 80)]), 401), /expired/);
    const other = await session([web1.name]);
    const del = await s.deleteSession(other.id, other.token);
    t.is(del.status, 204, describe(del));
    t.is(del.text, "");
    t.regex(assertDetailOnly(t, await s.sync(other.token, [entry(web1.name, 80)]), 401), /deleted/);
  },
);

test.serial("session delete - by an rca_ key of the tenant; another tenant's key gets 404", async (t) => {
  const sess = await session([web1.name]);
  const tenant = await s.c.admin(["create-tenant", "--name", `other-${Date.now()}`]);
  const foreign = await s.c.admin([
    "create-automation-key",
    "--tenant",
    String(tenant.tenant_id),
    "--name",
    "f",
  ]);
  assertDetailOnly(t, await s.deleteSession(sess.id, String(foreign.key)), 404);
  t.is(
    (await s.sync(sess.token, [entry(web1.name, web1.hostPort("one"), { force: true })])).status,
    200,
    "still alive",
  );
  t.is((await s.deleteSession(sess.id, s.c.key)).status, 204);
  assertDetailOnly(t, await s.sync(sess.token, [entry(web1.name, 80)]), 401);
  assertDetailOnly(t, await s.deleteSession("not-a-uuid", s.c.key), 404);
});

test.serial("applications - a bad FQDN is 422 and never reaches the proxy config", async (t) => {
  const bad = [
    "bad_name.example.test",
    "a..example.test",
    "evil.example.test; include /etc/passwd",
    "-x.example.test",
    `${"x".repeat(64)}.example.test`,
    "localhost",
    "*.*.example.test",
    "ex ample.test",
  ];
  for (const fqdn of bad) {
    const res = await s.manage("/applications", {
      body: {
        name: `bad-${Math.random()}`,
        server_id: s.c.serverId,
        linked_container_name: "bad-1",
        container_port: 80,
        fqdns: [fqdn],
      },
    });
    t.regex(assertDetailOnly(t, res, 422), /fqdns\[0\]/, fqdn);
    const patch = await s.manage(`/applications/${web.id}`, {
      method: "PATCH",
      body: { fqdns: ["ok.example.test", fqdn] },
    });
    t.regex(assertDetailOnly(t, patch, 422), /fqdns\[1\]/, fqdn);
  }
  const config = await caddyConfig();
  for (const fqdn of bad) t.false(config.includes(fqdn), fqdn);
  const list = await s.manage("/applications");
  t.false(JSON.stringify(list.json).includes("bad_name"));
});

test.serial(
  "applications - CRUD with validation: ports, container names, domain taken on the same server",
  async (t) => {
    assertDetailOnly(
      t,
      await s.manage("/applications", {
        body: { name: "p", server_id: s.c.serverId, linked_container_name: "p-1", container_port: 0 },
      }),
      422,
    );
    assertDetailOnly(
      t,
      await s.manage("/applications", {
        body: { name: "p", server_id: s.c.serverId, linked_container_name: "-p", container_port: 80 },
      }),
      422,
    );
    assertDetailOnly(
      t,
      await s.manage("/applications", {
        body: {
          name: "p",
          server_id: "00000000-0000-0000-0000-000000000000",
          linked_container_name: "p-1",
          container_port: 80,
        },
      }),
      422,
    );
    const taken = await s.manage("/applications", {
      body: {
        name: "p",
        server_id: s.c.serverId,
        linked_container_name: "p-1",
        container_port: 80,
        fqdns: ["www.example.test"],
      },
    });
    t.regex(assertDetailOnly(t, taken, 409), /www\.example\.test.*'web'/);
    assertDetailOnly(
      t,
      await s.manage("/applications", {
        body: { name: "web", server_id: s.c.serverId, linked_container_name: "p-1", container_port: 80 },
      }),
      409,
    );
    const patched = await s.manage(`/applications/${web.id}`, {
      method: "PATCH",
      body: { container_port: 8081 },
    });
    t.is(patched.status, 200, describe(patched));
    t.is(patched.json.container_port, 8081);
    t.deepEqual(patched.json.fqdns, ["web.example.test", "www.example.test"]);
    const list = await s.manage("/applications");
    const names = (list.json.applications as { name: string }[]).map((a) => a.name);
    t.true(names.includes("web") && names.includes("worker"), describe(list));
    const servers = await s.manage("/servers");
    t.true(
      (servers.json.servers as { id: string }[]).some((x) => x.id === s.c.serverId),
      describe(servers),
    );
  },
);

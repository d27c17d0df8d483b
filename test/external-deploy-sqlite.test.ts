// External deploy on the store and bus of `make dev` (SQLite, in-process bus)
// with a real Caddy and real podman containers: the batched claims, the entries
// settled with the completion (its claims given back, its audit event), the audit
// appends and the applications' pin_port column run on SQLite's dialect too, and
// the hash chain still verifies.
import { join } from "node:path";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { describe } from "./harness/assertions";
import { startCaddy } from "./harness/caddy";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { podmanAgentEnv, startWebContainer } from "./harness/containers";
import { startControlPlane } from "./harness/control-plane";
import { request } from "./harness/http";
import { proxyGet, waitForBackend } from "./harness/proxy-client";

test.after.always(cleanupAll);

test("sqlite - sessions, a multi-application sync, conflict and noop through Caddy", async (t) => {
  const dir = makeTempDir("ed-sqlite");
  const caddy = await startCaddy();
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl: `sqlite://${join(dir, "dev.db")}`,
    dir,
  });
  t.teardown(() => server.stop());
  const tenant = String((await server.admin(["create-tenant", "--name", "dev"])).tenant_id);
  const apiKey = String((await server.admin(["create-api-key", "--tenant", tenant, "--name", "m"])).key);
  const key = String((await server.admin(["create-automation-key", "--tenant", tenant, "--name", "ci"])).key);
  const token = await server.admin(["create-join-token", "--tenant", tenant, "--server-name", "local"]);
  const stateDir = join(dir, "agent");
  const enrolled = await enroll(server.apiUrl, String(token.join_token), stateDir);
  const agent = await new Agent(stateDir, dir, {
    ...podmanAgentEnv,
    RELAYCTL_AGENT_PROXY: "caddy",
    RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
    RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
    RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
  }).start();
  t.teardown(() => agent.stop());
  const boxes = await Promise.all([startWebContainer("a", ["a"]), startWebContainer("b", ["b"])]);

  const target = { baseUrl: server.apiUrl };
  for (const [i, name] of ["a", "b"].entries()) {
    const res = await request(target, "/api/applications", {
      headers: { "x-api-key": apiKey },
      body: {
        server_id: enrolled.server_id,
        name,
        linked_container_name: boxes[i]!.name,
        container_port: boxes[i]!.containerPort(name),
        pin_port: true,
        fqdns: [`${name}.sqlite.test`],
      },
    });
    t.is(res.status, 201, describe(res));
  }
  const open = async () => {
    const res = await request(target, "/external-deploy/session", {
      key,
      body: { container_names: boxes.map((b) => b.name) },
    });
    t.is(res.status, 201, describe(res));
    return String(res.json.session_token);
  };
  const deployments = boxes.map((b, i) => ({
    container_name: b.name,
    container_port: b.containerPort(["a", "b"][i]!),
    image_tag: "app:1",
  }));
  const sync = (bearer: string) =>
    request(target, "/external-deploy/sync", { key: bearer, body: { deployments } });

  const first = await open();
  const synced = await sync(first);
  t.is(synced.status, 200, describe(synced));
  t.deepEqual(
    (synced.json.results as { status: string }[]).map((r) => r.status),
    ["synced", "synced"],
  );
  await waitForBackend(caddy.httpPort, "a.sqlite.test", "a", 10_000);
  t.is((await proxyGet(caddy.httpPort, "b.sqlite.test")).body, "backend b");

  const again = await sync(first);
  t.deepEqual(
    (again.json.results as { status: string }[]).map((r) => r.status),
    ["noop", "noop"],
  );
  // pin_port is read back from SQLite's integer column: another port is refused.
  const wrong = await request(target, "/external-deploy/sync", {
    key: first,
    body: { deployments: [{ ...deployments[0], container_port: 1 }] },
  });
  t.deepEqual(wrong.json.results, [], describe(wrong));
  t.regex(JSON.stringify(wrong.json.errors), /application 'a' pins its port to 8001/);
  const other = await sync(await open());
  t.deepEqual(
    (other.json.results as { status: string }[]).map((r) => r.status),
    ["conflict", "conflict"],
  );

  const audit = await request(target, "/api/audit?limit=1000", { headers: { "x-api-key": apiKey } });
  // One event per sync (each touched one server), every entry in it with its outcome.
  const syncs = (audit.json.events as { event_type: string; seq: number; payload: Record<string, unknown> }[])
    .filter((e) => e.event_type === "external_deploy.sync")
    .sort((a, b) => a.seq - b.seq);
  t.deepEqual(
    syncs.map((e) => (e.payload.entries as { outcome: string }[]).map((x) => x.outcome)),
    [["synced", "synced"], ["noop", "noop"], ["error"], ["conflict", "conflict"]],
  );
  t.true(syncs.every((e) => e.payload.server_id === enrolled.server_id));
  t.deepEqual(
    syncs.map((e) => typeof e.payload.operation_id),
    ["string", "string", "object", "object"],
  );
  const verified = await server.admin(["audit", "verify", "--tenant", tenant]);
  t.true(verified.ok, JSON.stringify(verified));
});

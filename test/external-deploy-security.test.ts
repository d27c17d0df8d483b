// External deploy, the holes of issue 10 kept shut, with real podman containers
// behind a real Caddy:
// - a sync routes a domain only to a port the named container serves (the agent
//   asks the engine), never to any other port of the server;
// - an application may pin its port;
// - a session token is held to its opening key's rules on every call;
// - deleting a session with an rca_ key needs `external_deploy` and the server scope,
//   and a second DELETE with the session's own token is 204, as the README says.
import test from "ava";
import { Agent } from "./harness/agent";
import { assertDetailOnly, describe } from "./harness/assertions";
import { startCaddy } from "./harness/caddy";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { type WebContainer, podman, podmanAgentEnv, startWebContainer } from "./harness/containers";
import { request } from "./harness/http";
import { proxyGet, waitForBackend } from "./harness/proxy-client";
import { type RouteStack, startRouteStack } from "./harness/route-stack";
import { waitForMinuteRoom } from "./harness/wait";

let s: RouteStack;
let box: WebContainer;
let app: { id: string };
let other: { serverId: string };

test.before(async () => {
  s = await startRouteStack({ proxy: "caddy", agentEnv: podmanAgentEnv });
  box = await startWebContainer("sec", ["one", "two"]);
  app = await s.createApplication({
    name: "sec",
    linked_container_name: box.name,
    container_port: box.containerPort("one"),
    fqdns: ["sec.example.test"],
  });
  other = await s.c.addServer({ start: false });
});
test.after.always(cleanupAll);

const caddyConfig = async () => (await s.caddy!.admin("GET", "/config/")).text;
const apiPort = () => Number(new URL(s.c.baseUrl).port);
const entry = (container: string, port: number, extra: Record<string, unknown> = {}) => ({
  container_name: container,
  container_port: port,
  image_tag: "registry.example.test/sec:1",
  force: true,
  ...extra,
});

async function openSession(names: string[], key?: string) {
  const res = await s.openSession({ container_names: names }, key);
  if (res.status !== 201) throw new Error(`session: ${describe(res)}`);
  return { id: String(res.json.session_id), token: String(res.json.session_token) };
}

/** An rca_ key made through the management API, with its id for PATCH and DELETE. */
async function makeKey(body: Record<string, unknown>) {
  const res = await s.manage("/automation-keys", { body: { name: `k-${Math.random()}`, ...body } });
  if (res.status !== 201) throw new Error(`key: ${describe(res)}`);
  return { key: String(res.json.key), id: String(res.json.id) };
}

const patchKey = async (id: string, body: Record<string, unknown>) => {
  const res = await s.manage(`/automation-keys/${id}`, { method: "PATCH", body });
  if (res.status !== 200) throw new Error(`patch key: ${describe(res)}`);
};

function oneError(res: { json: Record<string, unknown> }) {
  const errors = res.json.errors as { container_name: string; reason: string }[];
  if (errors.length !== 1) throw new Error(`errors: ${JSON.stringify(res.json)}`);
  return errors[0]!;
}

const statuses = (res: { json: Record<string, unknown> }) =>
  (res.json.results as { status: string }[]).map((r) => r.status);

async function routeSyncOps(runId: string) {
  const rows = await s.c.db.query(
    "SELECT COUNT(*) AS n FROM operations WHERE operation_type = 'route_sync' AND run_id = ?",
    [runId],
  );
  return Number(rows[0]?.n);
}

test.serial(
  "port check - the port a container publishes is synced and traffic flows through Caddy",
  async (t) => {
    const sess = await openSession([box.name]);
    // The published host port (what the deploy-sync action sends).
    const res = await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]);
    t.is(res.status, 200, describe(res));
    t.deepEqual(res.json.errors, []);
    t.deepEqual(statuses(res), ["synced"]);
    await waitForBackend(s.proxyPort, "sec.example.test", "one", 10_000);
    // The container's own port routes to the host port it is published on.
    const byContainerPort = await s.sync(sess.token, [entry(box.name, box.containerPort("two"))]);
    t.deepEqual(statuses(byContainerPort), ["synced"], describe(byContainerPort));
    await waitForBackend(s.proxyPort, "sec.example.test", "two", 10_000);
    t.true((await caddyConfig()).includes(`127.0.0.1:${box.hostPort("two")}`));
  },
);

test.serial(
  "port check - the control plane's own port is an errors entry and never reaches Caddy",
  async (t) => {
    const victim = await s.createApplication({
      name: "victim",
      linked_container_name: box.name,
      container_port: 80,
      fqdns: ["a.example.com"],
    });
    const sess = await openSession([box.name]);
    const res = await s.sync(sess.token, [entry(box.name, apiPort())]);
    t.is(res.status, 200, describe(res));
    t.deepEqual(res.json.results, []);
    const errors = res.json.errors as { container_name: string; application_id: string; reason: string }[];
    t.deepEqual(errors.map((e) => e.application_id).sort(), [app.id, victim.id].sort(), describe(res));
    for (const e of errors) {
      t.is(e.container_name, box.name);
      t.regex(e.reason, new RegExp(`container '${box.name}' does not publish port ${apiPort()} on the host`));
    }
    const config = await caddyConfig();
    t.false(config.includes(`127.0.0.1:${apiPort()}`), "no route to the control plane's port");
    t.false(config.includes(victim.id));
    t.is((await proxyGet(s.proxyPort, "a.example.com")).status, 404);
    t.is((await proxyGet(s.proxyPort, "sec.example.test")).body, "backend two", "the live route stays");
    await s.manage(`/applications/${victim.id}`, { method: "DELETE" });
  },
);

test.serial("port check - a container that does not exist or does not run is an errors entry", async (t) => {
  const gone = await s.createApplication({
    name: "ghost",
    linked_container_name: "ghost-container-nowhere",
    container_port: 8080,
    fqdns: ["ghost.example.test"],
  });
  const stopped = await startWebContainer("stopped", ["x"]);
  const idle = await s.createApplication({
    name: "idle",
    linked_container_name: stopped.name,
    container_port: stopped.containerPort("x"),
    fqdns: ["idle.example.test"],
  });
  await podman(["stop", "-t", "0", stopped.name]);
  const sess = await openSession(["ghost-container-nowhere", stopped.name]);
  const res = await s.sync(sess.token, [
    entry("ghost-container-nowhere", 8080),
    entry(stopped.name, stopped.hostPort("x")),
  ]);
  const errors = res.json.errors as { container_name: string; reason: string }[];
  t.is(errors.length, 2, describe(res));
  t.regex(errors[0]!.reason, /no container is named 'ghost-container-nowhere' on this server/);
  t.regex(errors[1]!.reason, new RegExp(`container '${stopped.name}' is not running \\(exited\\)`));
  const config = await caddyConfig();
  t.false(config.includes(gone.id) || config.includes(idle.id));
});

test.serial(
  "port check - container-network mode: an exposed port is routed by name, another is refused",
  async (t) => {
    const caddy = await startCaddy();
    const server = await s.c.addServer({ start: false });
    const agent = new Agent(server.stateDir, s.c.dir, {
      ...podmanAgentEnv,
      RELAYCTL_AGENT_PROXY: "caddy",
      RELAYCTL_AGENT_PROXY_UPSTREAM: "container-network",
      RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
      RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
      RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
    });
    onCleanup(() => agent.stop());
    await agent.start();
    const netBox = await startWebContainer("net", ["n"], { expose: [9090] });
    await s.createApplication({
      name: "net",
      server_id: server.serverId,
      linked_container_name: netBox.name,
      container_port: 9090,
      fqdns: ["net.example.test"],
    });
    const sess = await openSession([netBox.name]);
    const ok = await s.sync(sess.token, [entry(netBox.name, 9090)]);
    t.deepEqual(statuses(ok), ["synced"], describe(ok));
    t.true((await caddy.admin("GET", "/config/")).text.includes(`${netBox.name}:9090`));
    const refused = await s.sync(sess.token, [entry(netBox.name, apiPort())]);
    t.regex(
      oneError(refused).reason,
      new RegExp(`container '${netBox.name}' does not expose port ${apiPort()}`),
    );
    t.false((await caddy.admin("GET", "/config/")).text.includes(`:${apiPort()}`));
  },
);

test.serial(
  "port check - a compose service name stands for its one running container; two are ambiguous",
  async (t) => {
    const service = `svc-${Math.random().toString(36).slice(2, 8)}`;
    const labels = { "com.docker.compose.service": service };
    // Compose names the container <project>-<service>-1; the pipeline syncs the service name.
    const first = await startWebContainer(`shop-${service}-1`, ["c"], { labels });
    await s.createApplication({
      name: service,
      linked_container_name: service,
      container_port: first.containerPort("c"),
      fqdns: [`${service}.example.test`],
    });
    const sess = await openSession([service]);
    const ok = await s.sync(sess.token, [entry(service, first.hostPort("c"))]);
    t.deepEqual(statuses(ok), ["synced"], describe(ok));
    await waitForBackend(s.proxyPort, `${service}.example.test`, "c", 10_000);
    const refused = await s.sync(sess.token, [entry(service, apiPort())]);
    t.regex(
      oneError(refused).reason,
      new RegExp(`container '${service}' does not publish port ${apiPort()}`),
    );
    const second = await startWebContainer(`shop-${service}-2`, ["d"], { labels });
    const twice = await s.sync(sess.token, [entry(service, second.hostPort("d"))]);
    t.regex(oneError(twice).reason, new RegExp(`compose service '${service}' has 2 running containers`));
    t.is((await proxyGet(s.proxyPort, `${service}.example.test`)).body, "backend c", "the live route stays");
  },
);

test.serial("pinned port - another port is an errors entry before anything reaches the agent", async (t) => {
  const pinned = await startWebContainer("pin", ["p", "q"]);
  const created = await s.manage("/applications", {
    body: {
      name: "pinned",
      server_id: s.c.serverId,
      linked_container_name: pinned.name,
      container_port: pinned.containerPort("p"),
      pin_port: true,
      fqdns: ["pin.example.test"],
    },
  });
  t.is(created.status, 201, describe(created));
  t.is(created.json.pin_port, true);
  const id = String(created.json.id);
  const res = await s.openSession({ container_names: [pinned.name], workflow_run_id: "run-pin" });
  const token = String(res.json.session_token);
  const refused = await s.sync(token, [entry(pinned.name, pinned.containerPort("q"))]);
  t.deepEqual(refused.json.results, []);
  t.is(
    oneError(refused).reason,
    `application 'pinned' pins its port to ${pinned.containerPort("p")}: container_port ${pinned.containerPort("q")} is refused`,
  );
  t.is(await routeSyncOps("run-pin"), 0, "no job went to the agent");
  t.false((await caddyConfig()).includes(id));
  const ok = await s.sync(token, [entry(pinned.name, pinned.containerPort("p"))]);
  t.deepEqual(statuses(ok), ["synced"], describe(ok));
  await waitForBackend(s.proxyPort, "pin.example.test", "p", 10_000);
  // The field is read, changed and validated like the others.
  t.is((await s.manage(`/applications/${id}`)).json.pin_port, true);
  const off = await s.manage(`/applications/${id}`, { method: "PATCH", body: { pin_port: false } });
  t.is(off.json.pin_port, false, describe(off));
  assertDetailOnly(
    t,
    await s.manage(`/applications/${id}`, { method: "PATCH", body: { pin_port: "yes" } }),
    422,
  );
  const unpinned = await s.sync(token, [entry(pinned.name, pinned.containerPort("q"))]);
  t.deepEqual(statuses(unpinned), ["synced"], describe(unpinned));
});

test.serial("pinned port - admin create-application --pin-port", async (t) => {
  const out = await s.c.admin([
    "create-application",
    "--tenant",
    s.c.tenantId,
    "--server",
    s.c.serverId,
    "--name",
    "cli-pinned",
    "--container",
    "cli-pinned-1",
    "--port",
    "3000",
    "--pin-port",
  ]);
  t.is(out.pin_port, true, JSON.stringify(out));
  const plain = await s.c.admin([
    "create-application",
    ...["--tenant", s.c.tenantId, "--server", s.c.serverId, "--name", "cli-plain"],
    ...["--container", "cli-plain-1", "--port", "3000"],
  ]);
  t.is(plain.pin_port, false, JSON.stringify(plain));
});

test.serial("session key - a key that loses external_deploy stops its sessions (403)", async (t) => {
  const k = await makeKey({ operations: ["external_deploy"] });
  const sess = await openSession([box.name], k.key);
  t.is((await s.sync(sess.token, [entry(box.name, box.hostPort("one"))])).status, 200);
  await patchKey(k.id, { operations: ["exec"] });
  const res = await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]);
  t.regex(assertDetailOnly(t, res, 403), /external_deploy/);
  t.regex(assertDetailOnly(t, await s.deleteSession(sess.id, sess.token), 403), /external_deploy/);
  await patchKey(k.id, { operations: ["external_deploy"] });
  t.is(
    (await s.sync(sess.token, [entry(box.name, box.hostPort("one"))])).status,
    200,
    "given back, it works",
  );
});

test.serial(
  "session key - the key's rate limit holds on syncs: 429, and nothing is sent beyond it",
  async (t) => {
    // The session's applications are read beside the limit's count (admission.ts): a refused sync
    // must still be refused whole.
    const k = await makeKey({ operations: ["external_deploy"], rate_limit: 3 });
    // The limit counts per minute of the wall clock: the four requests must fall in one minute
    // (a CI run saw the last one land in the next minute, and pass).
    await waitForMinuteRoom(30_000);
    const res = await s.openSession({ container_names: [box.name], workflow_run_id: "run-limit" }, k.key);
    t.is(res.status, 201, describe(res));
    const token = String(res.json.session_token);
    for (let i = 0; i < 2; i++)
      t.is((await s.sync(token, [entry(box.name, box.hostPort("one"))])).status, 200);
    const limited = await s.sync(token, [entry(box.name, box.hostPort("one"))]);
    t.regex(assertDetailOnly(t, limited, 429), /rate limit exceeded: 3 requests per /);
    t.is(await routeSyncOps("run-limit"), 2);
  },
);

test.serial("session key - a caller outside the key's IP allowlist is 403", async (t) => {
  const k = await makeKey({ operations: ["external_deploy"], ip_allowlist: ["127.0.0.1"] });
  const sess = await openSession([box.name], k.key);
  t.is((await s.sync(sess.token, [entry(box.name, box.hostPort("one"))])).status, 200);
  await patchKey(k.id, { ip_allowlist: ["10.9.8.0/24"] });
  const detail = assertDetailOnly(t, await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]), 403);
  t.regex(
    detail,
    /caller IP 127\.0\.0\.1 is not in the IP allowlist of the automation key that opened this session/,
  );
  assertDetailOnly(t, await s.deleteSession(sess.id, sess.token), 403);
});

test.serial(
  "session key - an expired or revoked key ends its sessions (401 with the key's reason)",
  async (t) => {
    const k = await makeKey({ operations: ["external_deploy"] });
    const sess = await openSession([box.name], k.key);
    await s.c.db.query("UPDATE automation_keys SET expires_at = ? WHERE id = ?", [Date.now() - 1, k.id]);
    const expired = await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]);
    t.is(assertDetailOnly(t, expired, 401), "the automation key that opened this session has expired");
    await s.c.db.query("UPDATE automation_keys SET expires_at = NULL WHERE id = ?", [k.id]);
    t.is((await s.sync(sess.token, [entry(box.name, box.hostPort("one"))])).status, 200);
    t.is((await s.manage(`/automation-keys/${k.id}`, { method: "DELETE" })).status, 204);
    const revoked = await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]);
    t.is(assertDetailOnly(t, revoked, 401), "the automation key that opened this session has been revoked");
  },
);

test.serial(
  "session key - applications moved out of the key's server scope are errors entries, nothing is sent",
  async (t) => {
    const k = await makeKey({ operations: ["external_deploy"], servers: [s.c.serverId] });
    const res = await s.openSession({ container_names: [box.name], workflow_run_id: "run-scope" }, k.key);
    t.is(res.status, 201, describe(res));
    const token = String(res.json.session_token);
    await patchKey(k.id, { servers: [other.serverId] });
    const sync = await s.sync(token, [entry(box.name, box.hostPort("one"))]);
    t.is(sync.status, 200, describe(sync));
    t.deepEqual(sync.json.results, []);
    t.regex(
      oneError(sync).reason,
      new RegExp(`application 'sec' is on server '${s.c.serverName}', outside the server scope of the key`),
    );
    t.is(await routeSyncOps("run-scope"), 0, "no job went to the agent");
  },
);

test.serial(
  "session delete - an rca_ key needs external_deploy and the session's servers (403)",
  async (t) => {
    const sess = await openSession([box.name]);
    const execOnly = await makeKey({ operations: ["exec"] });
    t.regex(assertDetailOnly(t, await s.deleteSession(sess.id, execOnly.key), 403), /external_deploy/);
    const elsewhere = await makeKey({ operations: ["external_deploy"], servers: [other.serverId] });
    const detail = assertDetailOnly(t, await s.deleteSession(sess.id, elsewhere.key), 403);
    t.regex(detail, new RegExp(`reaches server '${s.c.serverName}', outside this key's server scope`));
    const rows = await s.c.db.query("SELECT deleted_at FROM external_deploy_sessions WHERE id = ?", [
      sess.id,
    ]);
    t.is(rows[0]!.deleted_at, null, "the session still lives");
    t.is((await s.sync(sess.token, [entry(box.name, box.hostPort("one"))])).status, 200);
    const scoped = await makeKey({ operations: ["external_deploy"], servers: [s.c.serverId] });
    t.is((await s.deleteSession(sess.id, scoped.key)).status, 204);
    assertDetailOnly(t, await s.sync(sess.token, [entry(box.name, box.hostPort("one"))]), 401);
  },
);

test.serial(
  "session delete - with the session's own token again is 204 (idempotent, as documented)",
  async (t) => {
    const sess = await openSession([box.name]);
    const first = await s.deleteSession(sess.id, sess.token);
    t.is(first.status, 204, describe(first));
    const second = await s.deleteSession(sess.id, sess.token);
    t.is(second.status, 204, describe(second));
    t.is(second.text, "");
    t.regex(assertDetailOnly(t, await s.sync(sess.token, [entry(box.name, 80)]), 401), /deleted/);
    const audit = await s.manage("/audit?limit=1000");
    const deletions = (
      audit.json.events as { event_type: string; payload: Record<string, unknown> }[]
    ).filter((e) => e.event_type === "external_deploy.session_deleted" && e.payload.session_id === sess.id);
    t.is(deletions.length, 1, "one deletion in the trail");
    // Another session's id with this token is still not found.
    const another = await openSession([box.name]);
    assertDetailOnly(t, await s.deleteSession(another.id, sess.token), 404);
    const direct = await request(s.c, `/external-deploy/session/${sess.id}`, {
      method: "DELETE",
      key: s.c.key,
    });
    t.is(direct.status, 204, describe(direct));
  },
);

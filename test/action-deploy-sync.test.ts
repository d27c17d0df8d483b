// The deploy-sync action v2, bundled, run as the GitHub runner runs it, against
// a control plane, an agent, a real Caddy and real podman containers (the agent
// checks that each publishes the port it is synced with): compose files with several
// services (short and long port syntax, services no application links), the
// services input, the conflict guard failing the step, force, a wrong key.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { type ActionRun, runAction } from "./harness/action-runner";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type WebContainer, podmanAgentEnv, startWebContainer } from "./harness/containers";
import { proxyGet, waitForBackend } from "./harness/proxy-client";
import { type RouteStack, startRouteStack } from "./harness/route-stack";

let s: RouteStack;
// Compose services are named after their containers (unique per run: podman is shared).
let web: WebContainer;
let api: WebContainer;
let composeFile: string;

test.before(async () => {
  s = await startRouteStack({ proxy: "caddy", agentEnv: podmanAgentEnv });
  [web, api] = await Promise.all([
    startWebContainer("web", ["web", "web-moved"]),
    startWebContainer("api", ["api"]),
  ]);
  await s.createApplication({
    name: "web",
    linked_container_name: web.name,
    container_port: web.containerPort("web"),
    fqdns: ["web.action.test"],
  });
  await s.createApplication({
    name: "api",
    linked_container_name: api.name,
    container_port: api.containerPort("api"),
    fqdns: ["api.action.test", "*.api.action.test"],
  });
  composeFile = join(makeTempDir("compose"), "compose.yml");
  writeFileSync(
    composeFile,
    `name: shop
services:
  ${web.name}:
    image: ghcr.io/acme/web:\${WEB_TAG:-dev}
    ports:
      - "127.0.0.1:${web.hostPort("web")}:${web.containerPort("web")}"
    depends_on: [${api.name}]
  ${api.name}:
    image: ghcr.io/acme/api:1.4.2
    ports:
      - target: ${api.containerPort("api")}
        published: "${api.hostPort("api")}"
        protocol: tcp
        mode: host
  worker:
    build: ./worker
  db:
    image: mariadb:11
    volumes: ["db:/var/lib/mysql"]
volumes:
  db: {}
`,
  );
});
test.after.always(cleanupAll);

const inputs = (extra: Record<string, string> = {}) => ({
  api_key: s.c.key,
  url: s.c.baseUrl,
  compose_file: composeFile,
  ...extra,
});

const results = (run: ActionRun) =>
  JSON.parse(run.outputs.results ?? "[]") as { container_name: string; status: string; reason?: string }[];

/** Statuses by service, the services named web and api (their containers' prefixes). */
const statusOf = (run: ActionRun) =>
  Object.fromEntries(results(run).map((r) => [r.container_name.replace(/-[0-9a-z]{1,6}$/, ""), r.status]));

async function auditEvents(type: string) {
  const res = await s.manage("/audit?limit=1000");
  const events = res.json.events as { event_type: string; payload: Record<string, unknown> }[];
  return events.filter((e) => e.event_type === type);
}

async function sessionDeleted(t: { true(v: boolean, m?: string): void }, sessionId: string) {
  const rows = (await s.c.db.query("SELECT deleted_at FROM external_deploy_sessions WHERE id = ?", [
    sessionId,
  ])) as { deleted_at: number | null }[];
  t.true(
    rows.length === 1 && rows[0].deleted_at !== null,
    `session ${sessionId} deleted: ${JSON.stringify(rows)}`,
  );
  const deleted = await auditEvents("external_deploy.session_deleted");
  t.true(
    deleted.some((e) => e.payload.session_id === sessionId),
    "the deletion is audited",
  );
}

/** Secrets appear only in the ::add-mask:: commands the runner consumes, never in a log line. */
function assertMasked(t: { false(v: boolean, m?: string): void }, run: ActionRun, secrets: string[]) {
  const logLines = `${run.stdout}\n${run.stderr}`.split("\n").filter((l) => !l.startsWith("::add-mask::"));
  for (const secret of secrets)
    t.false(
      logLines.some((l) => l.includes(secret)),
      "secret in the log",
    );
  t.false(run.summary.includes("rds_") || run.summary.includes("rca_"), "secret in the job summary");
}

test.serial(
  "action - compose file: matched services synced and routed, unmatched ones warned, session deleted",
  async (t) => {
    const run = await runAction(inputs(), { WEB_TAG: "v1" });
    t.is(run.code, 0, run.stdout + run.stderr);
    t.deepEqual(statusOf(run), { web: "synced", api: "synced" });
    t.is(run.outputs.synced, "2");
    t.is(run.outputs.conflicts, "0");
    t.deepEqual(JSON.parse(run.outputs.unmatched).sort(), ["db", "worker"]);
    t.deepEqual(JSON.parse(run.outputs.errors), []);
    t.regex(run.stdout, /::warning::service 'worker' matches no application/);
    t.regex(run.stdout, /::warning::service 'db' matches no application/);
    t.regex(run.stdout, /service\s+status\s+domains\s+signature\s+detail/);
    t.regex(run.stdout, new RegExp(`${web.name}\\s+synced\\s+web\\.action\\.test\\s+sha256:`));
    t.regex(run.summary, /<th>service<\/th>/);
    t.true(
      run.summary.includes(`<td>${api.name}</td><td>synced</td><td>*.api.action.test, api.action.test</td>`),
      run.summary,
    );

    // Both compose port syntaxes gave the published host port the backends listen on.
    await waitForBackend(s.proxyPort, "web.action.test", "web", 10_000);
    t.is((await proxyGet(s.proxyPort, "web.action.test")).body, "backend web");
    t.is((await proxyGet(s.proxyPort, "api.action.test")).body, "backend api");
    t.is((await proxyGet(s.proxyPort, "v2.api.action.test")).body, "backend api");

    const sessionId = run.outputs.session_id;
    await sessionDeleted(t, sessionId);
    const created = (await auditEvents("external_deploy.session_created")).find(
      (e) => e.payload.session_id === sessionId,
    );
    t.is(created?.payload.workflow_run_id, "9100200300");
    t.is(created?.payload.commit_sha, "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed");
    const token = /::add-mask::(rds_\S+)/.exec(run.stdout)?.[1];
    t.truthy(token, "the session token is masked");
    assertMasked(t, run, [s.c.key, token!]);
    const afterDelete = await s.sync(token!, [
      { container_name: web.name, container_port: web.hostPort("web"), image_tag: "x:1" },
    ]);
    t.is(afterDelete.status, 401, describe(afterDelete));
  },
);

test.serial(
  "action - a second run within 30 s fails on conflict and still deletes its session",
  async (t) => {
    const run = await runAction(inputs(), { WEB_TAG: "v2" });
    t.is(run.code, 1, run.stdout + run.stderr);
    t.deepEqual(statusOf(run), { web: "conflict", api: "conflict" });
    t.is(run.outputs.conflicts, "2");
    t.regex(results(run)[0].reason ?? "", /session/);
    const both = [`${web.name}, ${api.name}`, `${api.name}, ${web.name}`];
    t.true(
      both.some((names) => run.stdout.includes(`::error::2 conflict(s) (${names}); rerun with force: true`)),
      run.stdout,
    );
    t.regex(run.summary, /<td>conflict<\/td>/);
    await sessionDeleted(t, run.outputs.session_id);
    t.is((await proxyGet(s.proxyPort, "web.action.test")).body, "backend web", "the live route is untouched");
  },
);

test.serial("action - force: true overrides the guard and the step succeeds", async (t) => {
  const run = await runAction(inputs({ force: "true" }), { WEB_TAG: "v3" });
  t.is(run.code, 0, run.stdout + run.stderr);
  // api's image did not change: its live route is left as it is.
  t.deepEqual(statusOf(run), { web: "synced", api: "noop" });
  t.is(run.outputs.noop, "1");
  t.regex(run.summary, /force: conflict guard overridden/);
  await sessionDeleted(t, run.outputs.session_id);
});

test.serial("action - services input: name:port entries move the traffic", async (t) => {
  {
    const moved = web.hostPort("web-moved");
    const run = await runAction(
      inputs({ compose_file: "", services: `${web.name}:${moved}, ghost:8080`, force: "true" }),
    );
    t.is(run.code, 0, run.stdout + run.stderr);
    t.deepEqual(statusOf(run), { web: "synced" });
    t.regex(run.stdout, /::warning::service 'ghost' matches no application/);
    await waitForBackend(s.proxyPort, "web.action.test", "web-moved", 10_000);
    t.is((await proxyGet(s.proxyPort, "web.action.test")).body, "backend web-moved");
    await sessionDeleted(t, run.outputs.session_id);
  }
});

test.serial("action - one service linked by two applications is sent once and routes both", async (t) => {
  await s.createApplication({
    name: "api-mirror",
    linked_container_name: api.name,
    container_port: api.containerPort("api"),
    fqdns: ["mirror.action.test"],
  });
  const run = await runAction(
    inputs({ compose_file: "", services: `${api.name}:${api.hostPort("api")}`, force: "true" }),
  );
  t.is(run.code, 0, run.stdout + run.stderr);
  const rows = results(run);
  t.is(rows.length, 2);
  t.true(rows.every((r) => r.container_name === api.name && r.status === "synced"));
  t.deepEqual(JSON.parse(run.outputs.errors), []);
  await waitForBackend(s.proxyPort, "mirror.action.test", "api", 10_000);
  t.is((await proxyGet(s.proxyPort, "api.action.test")).body, "backend api");
});

test.serial("action - a key that is not rca_ fails the step before any call", async (t) => {
  const before = await auditEvents("external_deploy.session_created");
  for (const key of [s.apiKey, "rk_t_retired0000", "rds_notakey"]) {
    const run = await runAction(inputs({ api_key: key }));
    t.is(run.code, 1);
    t.regex(run.stdout, /::error::input 'api_key' (must be an rca_ Automation key|is a retired)/);
    t.false("session_id" in run.outputs, "no session output");
  }
  t.is((await auditEvents("external_deploy.session_created")).length, before.length, "no session opened");
});

test.serial("action - no service matching an application fails with the server's reason", async (t) => {
  const run = await runAction(inputs({ compose_file: "", services: "nothing:80, nobody:81" }));
  t.is(run.code, 1);
  t.regex(run.stdout, /::error::open session: HTTP 400: .*no service matched/);
});

test.serial(
  "action - broken compose files and unreachable control planes fail with a clear line",
  async (t) => {
    const missing = await runAction(inputs({ compose_file: "/nonexistent/compose.yml" }));
    t.is(missing.code, 1);
    t.regex(missing.stdout, /::error::compose_file '\/nonexistent\/compose.yml': ENOENT/);
    const bad = join(makeTempDir("compose"), "bad.yml");
    writeFileSync(bad, "services:\n  web:\n    ports: ['80:http']\n");
    const badRun = await runAction(inputs({ compose_file: bad }));
    t.regex(
      badRun.stdout,
      /::error::compose_file '.*bad.yml': services\.web\.ports\[0\]: 'http' is not a port/,
    );
    const down = await runAction(inputs({ url: "http://127.0.0.1:9" }));
    t.is(down.code, 1);
    t.regex(down.stdout, /::error::open session: cannot reach http:\/\/127\.0\.0\.1:9/);
  },
);

// Every application has a URL (issue 26, item 2): with RELAYCTL_APPS_URL set, an
// application's name gives it a default hostname that routes through a real
// Caddy after a deploy, its JSON and its deployments carry `url`/`urls`, a name
// that maps to a hostname another application holds is refused, a PATCH of
// `fqdns` moves the live route at once (the new domain answers, the old one no
// longer, with no new deploy), and a bad template stops the server at boot.
// One application and one stack for the file (serial: each test starts from
// what the one before left serving); the image builds FROM the local busybox.
import { spawn } from "node:child_process";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { type App, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { SERVER_MAIN } from "./harness/programs";
import { proxyGet } from "./harness/proxy-client";

// The URL's port is the template's (where `make dev` says its proxy listens); the
// route itself is by hostname, so the test sends Host: to this stack's Caddy.
const TEMPLATE = "http://{app}.apps.test:8000";
const suffix = Math.random().toString(36).slice(2, 8);
/** Upper case, a space and an underscore: the label is `my-app-<suffix>`. */
const NAME = `My App_${suffix}`;
const HOST = `my-app-${suffix}.apps.test`;
const URL_OF = (host: string) => `http://${host}:8000`;

let s: DeployStack;
let repo: AppRepo;
let app: App;

test.before(async () => {
  repo = await createAppRepo({ first: "1" });
  s = await startDeployStack({ serverEnv: { RELAYCTL_APPS_URL: TEMPLATE } });
  app = await s.createApp(
    { name: NAME, linked_container_name: `my-app-${suffix}`, fqdns: [`old-${suffix}.deploy.test`] },
    repo,
  );
});
test.after.always(cleanupAll);

const body = async (host: string) => (await proxyGet(s.proxyPort, host)).body;

test.serial("app urls - the application's JSON carries its default URL and every URL", async (t) => {
  const expected = {
    url: URL_OF(HOST),
    urls: [URL_OF(HOST), URL_OF(`old-${suffix}.deploy.test`)],
    // The default hostname is not stored among the bound domains.
    fqdns: [`old-${suffix}.deploy.test`],
  };
  t.like(app.created.json, expected, describe(app.created));
  const one = await s.manage(`/applications/${app.id}`);
  t.like(one.json, expected, describe(one));
  const list = await s.manage("/applications");
  const listed = (list.json.applications as Record<string, unknown>[]).find((a) => a.id === app.id);
  t.like(listed, expected, describe(list));
});

test.serial("app urls - a name that maps to a hostname another application holds is refused", async (t) => {
  const res = await s.manage("/applications", {
    body: {
      name: `my app ${suffix}`,
      server_id: s.c.serverId,
      linked_container_name: `other-${suffix}`,
      container_port: 8080,
    },
  });
  t.is(res.status, 409, describe(res));
  t.true(String(res.json.detail).includes(`'${HOST}'`), describe(res));
  t.true(String(res.json.detail).includes(`'${NAME}'`), describe(res));
  // Nor can a domain of another application take it.
  const taken = await s.manage("/applications", {
    body: {
      name: `taker-${suffix}`,
      server_id: s.c.serverId,
      linked_container_name: `taker-${suffix}`,
      container_port: 8080,
      fqdns: [HOST],
    },
  });
  t.is(taken.status, 409, describe(taken));
});

test.serial("app urls - after a deploy the default hostname answers through Caddy", async (t) => {
  const d = await s.deployAndWait(app.id);
  t.like(d.op.json, { status: "completed", result: { exit_code: 0 } }, describe(d.op));
  t.is(await body(HOST), "version 1");
  t.is(await body(`old-${suffix}.deploy.test`), "version 1");
  const v = await s.deployment(app.id, d.deploymentId);
  t.is(v.json.url, URL_OF(HOST), describe(v));
  const history = await s.history(app.id);
  t.is((history.json.deployments as Record<string, unknown>[])[0]?.url, URL_OF(HOST), describe(history));
});

test.serial("app urls - a PATCH of fqdns moves the live route at once, with no deploy", async (t) => {
  const before = await s.history(app.id);
  const res = await s.manage(`/applications/${app.id}`, {
    method: "PATCH",
    body: { fqdns: [`new-${suffix}.deploy.test`] },
  });
  t.is(res.status, 200, describe(res));
  t.like(res.json, {
    fqdns: [`new-${suffix}.deploy.test`],
    url: URL_OF(HOST),
    urls: [URL_OF(HOST), URL_OF(`new-${suffix}.deploy.test`)],
    route: { status: "applied" },
  });
  t.regex(String((res.json.route as Record<string, unknown>).operation_id), /^[0-9a-f-]{36}$/);
  // Applied means served: no waiting for the proxy.
  t.is(await body(`new-${suffix}.deploy.test`), "version 1");
  t.is(await body(HOST), "version 1");
  const old = await proxyGet(s.proxyPort, `old-${suffix}.deploy.test`);
  t.not(old.body, "version 1", `the old domain still answers: ${old.status}`);
  // No deployment was made for it.
  const after = await s.history(app.id);
  t.is((after.json.deployments as unknown[]).length, (before.json.deployments as unknown[]).length);
  // It is an operation like the others (audited when it was recorded).
  const op = await s.waitOperation(String((res.json.route as Record<string, unknown>).operation_id));
  t.like(op.json, { operation_type: "route_sync", status: "completed" }, describe(op));
});

test.serial("app urls - a rename moves the default hostname with it", async (t) => {
  const res = await s.manage(`/applications/${app.id}`, {
    method: "PATCH",
    body: { name: `renamed-${suffix}` },
  });
  t.is(res.status, 200, describe(res));
  t.like(res.json, { url: URL_OF(`renamed-${suffix}.apps.test`), route: { status: "applied" } });
  t.is(await body(`renamed-${suffix}.apps.test`), "version 1");
  t.not(await body(HOST), "version 1", "the old default hostname still answers");
});

test("app urls - a bad RELAYCTL_APPS_URL stops the server with one clear line", async (t) => {
  const dir = makeTempDir("apps-url");
  const child = spawn(process.execPath, [SERVER_MAIN, "serve"], {
    env: {
      PATH: process.env.PATH,
      RELAYCTL_BUS: "memory",
      RELAYCTL_DATABASE_URL: `sqlite://${join(dir, "x.db")}`,
      RELAYCTL_APPS_URL: "http://apps.example.com/{app}",
    },
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  t.regex(output, /^relayctl-server: config: RELAYCTL_APPS_URL: must be http\(s\):\/\/\{app\}\./m);
  t.is(output.trim().split("\n").length, 1, output);
  t.is(code, 2);
});

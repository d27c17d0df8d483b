// `make dev` itself (scripts/dev.mjs): the first run creates the dev tenant, key
// and local agent; dev.json appears only when an exec works (a script that
// waits for the file gets a working exec on its first try, issue 16) and goes
// away when dev stops; the second run reuses the same state instead of creating
// new ones (the smoke run, --once). Issue 26: dev runs a Caddy, the sample
// (examples/hello) deploys with one command and answers at its dev URL through
// that Caddy, a Caddy that dies comes back with its routes, and the banner
// carries a one-time owner link. Caddy and podman are required, not optional:
// `make test` installs them, so their absence fails here instead of skipping.
import { execFile } from "node:child_process";
import { existsSync, readFileSync, statSync } from "node:fs";
import { get } from "node:http";
import { createServer } from "node:net";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { removeAppContainers } from "./harness/containers";
import { exec } from "./harness/http";
import { freePort } from "./harness/ports";
import { ManagedProcess } from "./harness/process";
import { REPO_ROOT } from "./harness/programs";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const dir = makeTempDir("devscript");
const devJson = join(dir, "dev.json");
let ports: { api: number; gateway: number; proxy: number; admin: number };
const appIds = new Set<string>();

const devEnv = () => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  RELAYCTL_DEV_DIR: dir,
  RELAYCTL_DEV_PORT: String(ports.api),
  RELAYCTL_DEV_GATEWAY_PORT: String(ports.gateway),
  RELAYCTL_DEV_PROXY_PORT: String(ports.proxy),
  RELAYCTL_DEV_PROXY_ADMIN_PORT: String(ports.admin),
});

function node(script: string, args: string[] = []) {
  return new Promise<{ code: number; out: string }>((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, script), ...args],
      { env: devEnv(), timeout: 170_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, out: `${stdout}${stderr}` }),
    );
  });
}

function onPath(binary: string): boolean {
  return (process.env.PATH ?? "").split(":").some((d) => d && existsSync(join(d, binary)));
}

test.before(async () => {
  const missing = ["caddy", "podman"].filter((b) => !onPath(b));
  if (missing.length > 0)
    throw new Error(
      `make dev's smoke needs ${missing.join(" and ")} (make test installs them: make system-deps)`,
    );
  // make dev listens where its variables say (a person's fixed URLs) and the test checks the
  // URLs it prints, so the ports are chosen before it starts: freePort, not port 0.
  ports = {
    api: await freePort(),
    gateway: await freePort(),
    proxy: await freePort(),
    admin: await freePort(),
  };
});

// The deployed sample outlives dev (as it would for a person); the tests remove theirs.
test.after.always(async () => {
  for (const id of appIds) await removeAppContainers(id);
});

/** The application "hello" of the dev tenant, read with dev.json's API key. */
async function helloApp(dev: Record<string, string>) {
  const res = await fetch(`${dev.base_url}/api/applications`, { headers: { "x-api-key": dev.api_key! } });
  const { applications } = (await res.json()) as { applications: { id: string; name: string }[] };
  const app = applications.find((a) => a.name === "hello");
  if (app) appIds.add(app.id);
  return app;
}

/** What examples/hello/www/index.html says. */
const HELLO_TEXT = "Hello from relayctl";

/**
 * GET / of the proxy port with `Host: hello.localhost:<port>`, as a browser resolving
 * *.localhost sends it; with the Server header, which says whether Caddy answered.
 */
function getHello(): Promise<{ status: number; server: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = get(
      {
        host: "127.0.0.1",
        port: ports.proxy,
        path: "/",
        headers: { host: `hello.localhost:${ports.proxy}`, connection: "close" },
        agent: false,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, server: String(res.headers.server), body }),
        );
      },
    );
    req.on("error", reject);
  });
}

let first: Record<string, string>;

test.serial("make dev - a script that waits for dev.json gets a working exec on its first try", async (t) => {
  const dev = new ManagedProcess({
    name: "make-dev",
    command: process.execPath,
    args: [join(REPO_ROOT, "scripts/dev.mjs")],
    env: devEnv(),
    logFile: join(dir, "dev-1.log"),
  });
  t.teardown(() => dev.stop("SIGKILL"));
  // Polled often, and used the moment it appears: no grace period for the agent.
  const text = await pollUntil(() => (existsSync(devJson) ? readFileSync(devJson, "utf8") : undefined), {
    what: "dev.json",
    timeoutMs: 120_000,
    intervalMs: 10,
  });
  first = JSON.parse(text); // written atomically: never a partial file
  const res = await exec(
    { baseUrl: first.base_url!, key: first.automation_key },
    { server_id: first.server_id, command: "echo first-try", timeout_seconds: 30 },
  );
  t.is(res.status, 200, `${describe(res)}\n${dev.tail()}`);
  t.like(res.json, { status: "completed", exit_code: 0, stdout: "first-try\n" });
  t.is(first.base_url, `http://127.0.0.1:${ports.api}`);
  t.regex(first.automation_key!, /^rca_/);
  t.regex(first.api_key!, /^rck_/);
  t.is(first.server_name, "local");
  t.is(first.proxy_url, `http://127.0.0.1:${ports.proxy}`);
  t.is(first.apps_url, `http://{app}.localhost:${ports.proxy}`);
  t.is(statSync(devJson).mode & 0o777, 0o600);
  t.regex(dev.text(), /first run/);

  // The banner: the dashboard, and a one-time owner link that is not written to any file.
  await pollUntil(() => (/Ctrl-C stops everything/.test(dev.text()) ? true : undefined), {
    what: "the ready banner",
    timeoutMs: 10_000,
  });
  t.regex(dev.text(), new RegExp(`dashboard +http://127\\.0\\.0\\.1:${ports.api}/app/`));
  const link = /\/invite\/(rin_[A-Za-z0-9]+)/.exec(dev.text());
  t.truthy(link, dev.tail());
  t.false(readFileSync(devJson, "utf8").includes(link![1]!), "the sign-in link is printed only");
  const invite = await fetch(`${first.base_url}/invite/${link![1]}`);
  t.is(invite.status, 200);
  t.regex(await invite.text(), /you@relayctl\.localhost/);

  // The one command after make dev: the sample deploys and answers at its dev URL, through Caddy.
  const hello = await node("scripts/dev-hello.mjs");
  await helloApp(first);
  t.is(hello.code, 0, `${hello.out}\n${dev.tail()}`);
  t.regex(hello.out, new RegExp(`hello is live: http://hello\\.localhost:${ports.proxy}/?`));
  t.regex(hello.out, / {2}(build|start|switch) +succeeded/);
  const page = await getHello();
  t.is(page.status, 200, page.body);
  t.true(page.body.includes(HELLO_TEXT), page.body);
  t.is(page.server, "Caddy", "the page came through the dev Caddy (busybox httpd sends no Server header)");

  // Caddy killed: dev says so, starts it again, and the route is there at once.
  const pidFile = join(dir, "caddy", "caddy.pid");
  const pid = Number(readFileSync(pidFile, "utf8"));
  // Never 0 or 1: process.kill(0) would signal this test run's own process group.
  if (!Number.isInteger(pid) || pid <= 1)
    throw new Error(`caddy.pid holds no pid: '${readFileSync(pidFile, "utf8")}'`);
  process.kill(pid, "SIGKILL");
  const back = await pollUntil(
    async () => {
      if (!existsSync(pidFile) || Number(readFileSync(pidFile, "utf8")) === pid) return undefined;
      const p = await getHello().catch(() => undefined);
      return p?.status === 200 ? p : undefined;
    },
    { what: "the restarted Caddy to serve hello", timeoutMs: 30_000 },
  );
  t.true(back.body.includes(HELLO_TEXT));
  t.regex(dev.text(), /caddy exited unexpectedly/);

  const exit = await dev.stop("SIGTERM", 15_000);
  t.is(exit.code, 0, dev.tail());
  t.false(existsSync(devJson), "a stopped dev leaves no dev.json behind");
  t.true(existsSync(join(dir, "state.json")), "the state for the next run stays");
});

test.serial(
  "make dev - the second run reuses the same key and server, and the smoke deploys the sample",
  async (t) => {
    const second = await node("scripts/dev.mjs", ["--once"]);
    t.is(second.code, 0, second.out);
    t.regex(second.out, /smoke check passed/);
    t.regex(second.out, /server: Caddy/);
    t.regex(
      second.out,
      new RegExp(`http://hello\\.localhost:${ports.proxy}/? served "${HELLO_TEXT}" through Caddy`),
    );
    t.notRegex(second.out, /first run/);
    const state = JSON.parse(readFileSync(join(dir, "state.json"), "utf8"));
    t.is(state.automation_key, first.automation_key);
    t.is(state.server_id, first.server_id);
  },
);

test.serial(
  "make dev - a taken proxy port stops it with one line naming the variable that moves it",
  async (t) => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(ports.proxy, "127.0.0.1", resolve));
    t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())));
    const run = await node("scripts/dev.mjs", ["--once"]);
    t.not(run.code, 0, run.out);
    t.regex(
      run.out,
      new RegExp(`port ${ports.proxy} on 127\\.0\\.0\\.1 \\(dev proxy\\).*RELAYCTL_DEV_PROXY_PORT=`),
    );
    t.notRegex(run.out, /relayctl is running/);
  },
);

// Issue 26 item 1: the agent's `auto` engine is chosen by asking the engines,
// not by finding a CLI on PATH. The machine here has a docker CLI and no daemon;
// a fake `docker` first on PATH makes that explicit (it stands in for a broken
// machine, not for our code): its `info` fails the way the real CLI's does, or
// answers once its "daemon-up" file exists. podman is the real one. Everything
// else is real: NATS, MariaDB, api, gateway, agents over gRPC.
import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { CliUser } from "./harness/cli";
import { type Cluster, startCluster } from "./harness/cluster";
import { podmanAgentEnv } from "./harness/containers";
import { startControlPlane } from "./harness/control-plane";
import { type ApiResponse, api, exec, request, waitForOperationEnd } from "./harness/http";
import { pollUntil } from "./harness/wait";

const run = promisify(execFile);

const NO_DAEMON =
  "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?";

const FIX =
  "install podman and runc (apt-get install podman runc) or start the docker daemon (systemctl start docker)";

/** A dir holding a fake `docker`: no daemon until <dir>/daemon-up exists, then `info` says 27.0.0-fake. */
function fakeDockerDir(prefix: string): string {
  const dir = makeTempDir(prefix);
  writeFileSync(
    join(dir, "docker"),
    `#!/bin/sh
if [ ! -e '${dir}/daemon-up' ]; then echo '${NO_DAEMON}' >&2; exit 1; fi
if [ "$1" = info ]; then echo 27.0.0-fake; exit 0; fi
echo "$2"
`,
  );
  chmodSync(join(dir, "docker"), 0o755);
  return dir;
}

/**
 * A PATH with the fake docker and only the programs the agent itself needs (its
 * runner: sh, setsid, env, mkfifo; git for deployments), so podman is not on it.
 * /bin is /usr/bin here, so the system dirs cannot be on it.
 */
function pathWithoutPodman(dockerDir: string): string {
  const tools = join(dockerDir, "tools");
  mkdirSync(tools);
  for (const name of ["sh", "setsid", "env", "mkfifo", "rm", "cat", "git"]) {
    const found = ["/usr/bin", "/bin"].map((d) => join(d, name)).find((p) => existsSync(p));
    if (found) symlinkSync(found, join(tools, name));
  }
  return `${dockerDir}:${tools}`;
}

let c: Cluster;
let apiKey: string;
const podmanMachine = fakeDockerDir("engine-podman");

test.before(async () => {
  // The cluster's agent: auto, the fake docker first, the real podman (its runc recipe) after it.
  c = await startCluster({
    agentEnv: {
      PATH: `${podmanMachine}:${process.env.PATH}`,
      CONTAINERS_CONF: podmanAgentEnv.CONTAINERS_CONF!,
    },
  });
  apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);
});
test.after.always(cleanupAll);

const manage = (path: string, body?: unknown): Promise<ApiResponse> =>
  request(c, `/api${path}`, { body, key: null, headers: { "x-api-key": apiKey } });

interface Engine {
  name: string | null;
  version: string | null;
  ok: boolean;
  detail: string;
}

/** GET /api/servers until the server's engine satisfies `ok`; returns it. */
function engineOf(serverId: string, ok: (e: Engine) => boolean, what: string): Promise<Engine> {
  return pollUntil(
    async () => {
      const res = await manage("/servers");
      if (res.status !== 200) throw new Error(describe(res));
      const server = (res.json.servers as Array<{ id: string; engine: Engine | null }>).find(
        (s) => s.id === serverId,
      );
      return server?.engine && ok(server.engine) ? server.engine : undefined;
    },
    { what, timeoutMs: 60_000 },
  );
}

/** A git repository that could be fetched: a deploy failing before fetch fails for the engine alone. */
async function gitRepo(): Promise<string> {
  const dir = makeTempDir("engine-repo");
  const git = (args: string[]) =>
    run("git", args, {
      cwd: dir,
      env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
    });
  await git(["init", "-q", "-b", "main"]);
  writeFileSync(join(dir, "Dockerfile"), "FROM scratch\n");
  await git(["add", "-A"]);
  await git(["-c", "user.name=T", "-c", "user.email=t@relayctl.test", "commit", "-q", "-m", "first"]);
  return dir;
}

test.serial("engine - auto skips a docker CLI whose daemon does not answer and picks podman", async (t) => {
  const line = await c.agent.proc.waitForLine(
    (l) => String(l.json?.msg ?? "").startsWith("container engine:"),
    {
      timeoutMs: 60_000,
      what: "the agent's engine line",
    },
  );
  const msg = String(line.json?.msg);
  t.regex(msg, /^container engine: podman \d+\.\d+/, msg);
  t.true(msg.includes(`docker skipped: \`docker info\` exited with code 1: ${NO_DAEMON}`), msg);
  t.like(line.json, { engine: "podman", ok: true });

  const engine = await engineOf(c.serverId, () => true, "GET /api/servers to show the engine");
  t.is(engine.name, "podman");
  t.true(engine.ok);
  t.regex(String(engine.version), /^\d+\.\d+/);
  t.true(engine.detail.startsWith("chosen by auto; docker skipped"), engine.detail);
});

test.serial(
  "engine - with neither working a deploy fails at once with the reason and the fix, and exec still works",
  async (t) => {
    const dockerDir = fakeDockerDir("engine-none");
    const server = await c.addServer({ start: false });
    const agent = new Agent(server.stateDir, c.dir, {
      PATH: pathWithoutPodman(dockerDir),
      RELAYCTL_AGENT_SHELL: "/bin/sh",
    });
    onCleanup(() => agent.stop());
    await agent.start();

    const none = await engineOf(server.serverId, (e) => !e.ok, "GET /api/servers to say no engine works");
    t.is(none.name, null);
    t.is(none.version, null);
    t.is(
      none.detail,
      `docker: \`docker info\` exited with code 1: ${NO_DAEMON}; podman: no podman on PATH. Fix: ${FIX}`,
    );
    // `relayctl servers` shows both servers' engines, and the reason under the table.
    const cli = await new CliUser({ RELAYCTL_URL: c.baseUrl, RELAYCTL_TOKEN: apiKey }).run(["servers"]);
    t.is(cli.code, 0, cli.stderr);
    t.regex(cli.stdout, /^ID\s+NAME\s+CONNECTED\s+HOSTNAME\s+AGENT\s+LAST SEEN\s+ENGINE\s+PROXY\s+LABELS$/m);
    t.regex(
      cli.stdout,
      new RegExp(`^${c.serverId}\\s+${c.serverName}\\s.*\\spodman \\d+\\.\\d+\\S*\\s+none\\s+-$`, "m"),
    );
    t.regex(
      cli.stdout,
      new RegExp(`^${server.serverId}\\s+${server.serverName}\\s.*\\snone working\\s+none\\s+-$`, "m"),
    );
    t.true(cli.stdout.includes(`\n${server.serverName}: ${none.detail}\n`), cli.stdout);

    const logged = await agent.proc.waitForLine((l) => l.json?.msg !== undefined && l.json.ok === false, {
      timeoutMs: 10_000,
      what: "the agent's no-engine line",
    });
    t.deepEqual(String(logged.json?.msg).split("\n").slice(1), [
      `  docker: \`docker info\` exited with code 1: ${NO_DAEMON}`,
      "  podman: no podman on PATH",
      `  fix: ${FIX}`,
    ]);

    const created = await manage("/applications", {
      name: `noengine-${Math.random().toString(36).slice(2, 8)}`,
      server_id: server.serverId,
      linked_container_name: "noengine",
      container_port: 8080,
      fqdns: ["noengine.deploy.test"],
      git_repository: await gitRepo(),
      build: { type: "dockerfile" },
    });
    t.is(created.status, 201, describe(created));
    const appId = String(created.json.id);
    const started = await api(c, "/deploy", { body: { application_id: appId, timeout_seconds: 120 } });
    t.is(started.status, 202, describe(started));
    const t0 = Date.now();
    const op = await waitForOperationEnd(c, String(started.json.operation_id), 60_000);
    const result = op.json.result as { exit_code: number; stderr: string; duration_ms: number };
    t.is(op.json.status, "failed", describe(op));
    t.is(result.exit_code, 1);
    t.is(
      result.stderr,
      `fetch: no container engine works: ${none.detail}`,
      "the reason and the fix, not the engine's raw error",
    );
    // At once: no fetch, no build, nowhere near the 120 s deadline.
    t.true(result.duration_ms < 5000, `${result.duration_ms} ms`);
    t.true(Date.now() - t0 < 30_000);
    t.false(existsSync(join(server.stateDir, "deploy", appId)), "no git fetch happened");
    const deployment = await manage(
      `/tenants/${c.tenantId}/applications/${appId}/deployments/${String(started.json.deployment_id)}`,
    );
    t.like(
      deployment.json,
      { status: "failed", failed_step: "fetch", commit_sha: null },
      describe(deployment),
    );

    const restart = await api(c, "/restart", { body: { server_id: server.serverId, container_name: "web" } });
    const restarted = await waitForOperationEnd(c, String(restart.json.operation_id), 30_000);
    t.is(restarted.json.status, "failed", describe(restarted));
    t.is((restarted.json.result as { stderr: string }).stderr, `no container engine works: ${none.detail}`);

    const echoed = await exec(c, { server_id: server.serverId, command: "echo still here" });
    t.is(echoed.status, 200, describe(echoed));
    t.is(echoed.json.stdout, "still here\n", describe(echoed));
  },
);

test.serial("engine - a docker daemon started later is found without restarting the agent", async (t) => {
  const dockerDir = fakeDockerDir("engine-later");
  const server = await c.addServer({ start: false });
  const agent = new Agent(server.stateDir, c.dir, { PATH: pathWithoutPodman(dockerDir) });
  onCleanup(() => agent.stop());
  await agent.start();
  await engineOf(server.serverId, (e) => !e.ok, "GET /api/servers to say no engine works");

  writeFileSync(join(dockerDir, "daemon-up"), "");
  // A job that needs the engine probes again when the last probe found none (at
  // most every 2 s, so a burst of jobs is not a burst of probes): the first
  // restarts may still get the cached answer, a later one runs.
  const restart = await pollUntil(
    async () => {
      const res = await api(c, "/restart", { body: { server_id: server.serverId, container_name: "web" } });
      if (res.json.status === "failed") t.regex(String(res.json.stderr), /^no container engine works: /);
      return res.json.status === "completed" ? res : undefined;
    },
    { what: "a restart to run on the docker started later", timeoutMs: 20_000, intervalMs: 500 },
  );
  t.like(restart.json, { status: "completed", exit_code: 0, stdout: "web\n" }, describe(restart));
  const engine = await engineOf(server.serverId, (e) => e.ok, "GET /api/servers to show docker");
  t.deepEqual(engine, { name: "docker", version: "27.0.0-fake", ok: true, detail: "chosen by auto" });
  t.is(agent.generations.length, 1, "the same agent process");
});

test.serial("engine - stored and shown on the SQLite store of make dev too", async (t) => {
  const dir = makeTempDir("engine-sqlite");
  const databaseUrl = `sqlite://${join(dir, "dev.db")}`;
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl,
    dir,
  });
  t.teardown(() => server.stop());
  const tenant = String((await server.admin(["create-tenant", "--name", "dev"])).tenant_id);
  const key = String((await server.admin(["create-api-key", "--tenant", tenant, "--name", "k"])).key);
  const token = await server.admin(["create-join-token", "--tenant", tenant, "--server-name", "local"]);
  const stateDir = join(dir, "agent");
  const { server_id } = await enroll(server.apiUrl, String(token.join_token), stateDir);
  const agent = new Agent(stateDir, dir, { PATH: pathWithoutPodman(fakeDockerDir("engine-sqlite-bin")) });
  onCleanup(() => agent.stop());
  await agent.start();
  const engine = await pollUntil(
    async () => {
      const res = await request({ baseUrl: server.apiUrl }, "/api/servers", {
        headers: { "x-api-key": key },
      });
      const s = (res.json.servers as Array<{ id: string; engine: Engine | null }> | undefined)?.find(
        (x) => x.id === server_id,
      );
      return s?.engine ?? undefined;
    },
    { what: "GET /api/servers on SQLite to show the engine", timeoutMs: 60_000 },
  );
  t.like(engine, { name: null, version: null, ok: false });
  t.true(engine.detail.startsWith("docker: `docker info` exited with code 1"), engine.detail);
});

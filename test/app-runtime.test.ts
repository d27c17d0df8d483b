// The running application (issue 29), with podman, a real agent over gRPC and
// Caddy: a deployed app runs with a restart policy, so a killed app process
// comes back on its own and serves through the proxy again; the agent reports
// its container (state, restart count, last crash) and a crash loop; deleting
// the application removes its containers and images, at once when the agent is
// connected and at its next connection when it was away, and moving it to
// another server removes them from the old one. Serial: one test stops
// the stack's only agent.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { appImageIds, podman } from "./harness/containers";
import { type App, DEPLOY_WAIT_MS, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { createAppRepo } from "./harness/git-repo";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

/** The agent polls every 5 s; a loaded machine can take a few polls more. */
const REPORT_MS = 60_000;

interface Container {
  name: string;
  state: string;
  exit_code: number | null;
  restart_count: number;
  last_crash_at: string | null;
  since: string | null;
}

/** The machine's boot id, in a file of the test's: a "reboot" writes a new one. */
const bootFile = join(makeTempDir("app-runtime"), "boot_id");
writeFileSync(bootFile, `${randomUUID()}\n`);

let s: DeployStack;
test.before(async () => {
  s = await startDeployStack({
    agentEnv: { RELAYCTL_AGENT_BOOT_ID_FILE: bootFile, RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: "1" },
  });
});
test.after.always(cleanupAll);

async function deployed(): Promise<App> {
  const app = await s.createApp({}, await createAppRepo());
  const d = await s.deployAndWait(app.id);
  if (d.op.json.status !== "completed") throw new Error(`deploy: ${describe(d.op)}`);
  return app;
}

async function containerOf(appId: string): Promise<Container | null> {
  const res = await s.manage(`/applications/${appId}`);
  if (res.status !== 200) throw new Error(`GET application: ${describe(res)}`);
  return res.json.container as Container | null;
}

/** Polls the application's JSON until its container matches. */
async function reported(appId: string, what: string, ok: (c: Container) => boolean): Promise<Container> {
  let last: Container | null = null;
  try {
    return await pollUntil(
      async () => {
        last = await containerOf(appId);
        return last && ok(last) ? last : undefined;
      },
      { timeoutMs: REPORT_MS, intervalMs: 250, what },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last container: ${JSON.stringify(last)}`);
  }
}

async function cleanupEvents(appId: string) {
  const audit = await s.manage("/audit?limit=1000");
  const events = audit.json.events as { event_type: string; payload: Record<string, unknown> }[];
  return events.filter((e) => e.event_type === "operation.app_cleanup" && e.payload.application_id === appId);
}

const pendingRows = async (appId: string) =>
  (await s.c.db.query("SELECT application_id FROM application_cleanups WHERE application_id = ?", [
    appId,
  ])) as unknown[];

async function inspect(name: string): Promise<{ status: string; restarts: number; pid: number }> {
  const { stdout } = await podman([
    "container",
    "inspect",
    name,
    "--format",
    "{{.State.Status}} {{.RestartCount}} {{.State.Pid}}",
  ]);
  const [status, restarts, pid] = stdout.trim().split(" ");
  return { status: status!, restarts: Number(restarts), pid: Number(pid) };
}

/** Kills the app's process (the child of the container's init) from the host, as a crash would end it. */
async function killApp(name: string): Promise<number> {
  const before = await inspect(name);
  const children = readFileSync(`/proc/${before.pid}/task/${before.pid}/children`, "utf8")
    .trim()
    .split(/\s+/);
  for (const pid of children) process.kill(Number(pid), "SIGKILL");
  // The engine brings it back (--restart unless-stopped): a new run, counted.
  await pollUntil(
    async () => {
      const now = await inspect(name);
      return now.status === "running" && now.restarts > before.restarts ? true : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 100, what: `${name} restarted by podman` },
  );
  return before.restarts + 1;
}

const labelled = async (kind: "ps" | "images", appId: string) => {
  const filter = `label=relayctl.application=${appId}`;
  // Built images carry no label: the application's are tagged in its repository.
  if (kind === "images") return appImageIds(appId);
  return (await podman(["ps", "-a", "-q", "--filter", filter])).stdout.split("\n").filter(Boolean);
};

test.serial("running app - a killed app process comes back, serves again and is reported", async (t) => {
  const app = await deployed();
  const first = await reported(app.id, "running reported", (c) => c.state === "running");
  t.is(first.restart_count, 0);
  t.is(first.last_crash_at, null);

  const restarts = await killApp(first.name);
  t.is(restarts, 1);
  // Back through the proxy: the container kept its published port.
  await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
    timeoutMs: 30_000,
    what: "the app served through Caddy again",
  });
  const after = await reported(app.id, "the restart reported", (c) => c.restart_count === 1);
  t.is(after.state, "running");
  t.is(after.name, first.name);
  t.truthy(after.last_crash_at, "the crash's time");
});

test.serial("running app - three crashes within 5 minutes are reported as a crash loop", async (t) => {
  const app = await deployed();
  const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
  for (let i = 0; i < 3; i++) await killApp(name);
  const loop = await reported(app.id, "crash_loop reported", (c) => c.state === "crash_loop");
  t.is(loop.restart_count, 3);
  t.truthy(loop.last_crash_at);
});

test.serial("delete - removes the application's containers and images, audited", async (t) => {
  const app = await deployed();
  t.true((await labelled("ps", app.id)).length > 0);
  t.true((await labelled("images", app.id)).length > 0);
  const del = await s.manage(`/applications/${app.id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  await pollUntil(
    async () =>
      (await labelled("ps", app.id)).length === 0 && (await labelled("images", app.id)).length === 0
        ? true
        : undefined,
    { timeoutMs: DEPLOY_WAIT_MS, what: "podman ps -a and podman images without the application's" },
  );
  t.is((await cleanupEvents(app.id)).length, 1, "the cleanup operation is in the audit trail");
  await pollUntil(async () => ((await pendingRows(app.id)).length === 0 ? true : undefined), {
    timeoutMs: 30_000,
    what: "no cleanup left pending",
  });
});

test.serial("delete - with the agent offline, the cleanup is done when it reconnects", async (t) => {
  const app = await deployed();
  const agent = s.c.agent;
  await agent.stop();
  const del = await s.manage(`/applications/${app.id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  t.true((await labelled("ps", app.id)).length > 0, "nothing removed while the agent is away");
  t.is((await pendingRows(app.id)).length, 1, "the cleanup is pending");
  await agent.start();
  await pollUntil(
    async () =>
      (await labelled("ps", app.id)).length === 0 && (await labelled("images", app.id)).length === 0
        ? true
        : undefined,
    { timeoutMs: DEPLOY_WAIT_MS, what: "the pending cleanup done at the agent's Hello" },
  );
  await pollUntil(async () => ((await pendingRows(app.id)).length === 0 ? true : undefined), {
    timeoutMs: 30_000,
    what: "the pending cleanup ended by the agent's report",
  });
  // Both are audited: the one the deletion could not hand over, the one sent at Hello.
  t.is((await cleanupEvents(app.id)).length, 2);
});

test.serial("delete - during a deployment: the cleanup follows it, nothing is left", async (t) => {
  const repo = await createAppRepo();
  const app = await s.createApp({}, repo);
  const first = await s.deployAndWait(app.id);
  t.like(first.op.json, { status: "completed" }, describe(first.op));
  await repo.commitVersion("2");
  const second = await s.deploy(app.id);
  t.is(second.status, 202, describe(second));
  // Deleted while the second deployment runs on the agent.
  await pollUntil(
    async () => {
      const v = await s.deployment(app.id, String(second.json.deployment_id));
      return v.json.status === "running" ? true : undefined;
    },
    { timeoutMs: DEPLOY_WAIT_MS, intervalMs: 50, what: "the second deployment running on the agent" },
  );
  const del = await s.manage(`/applications/${app.id}`, { method: "DELETE" });
  t.is(del.status, 204, describe(del));
  const op = await s.waitOperation(String(second.json.operation_id));
  t.not(op.json.status, "running");
  await pollUntil(
    async () =>
      (await labelled("ps", app.id)).length === 0 && (await labelled("images", app.id)).length === 0
        ? true
        : undefined,
    { timeoutMs: DEPLOY_WAIT_MS, what: "no container or image of the application left" },
  );
  await pollUntil(async () => ((await pendingRows(app.id)).length === 0 ? true : undefined), {
    timeoutMs: 30_000,
    what: "no cleanup left pending",
  });
  const answer = await proxyGet(s.proxyPort, app.fqdn);
  t.false(
    answer.status === 200 && answer.body.startsWith("version"),
    `still routed: ${answer.status} ${answer.body}`,
  );
});

test.serial("move - an application moved to another server leaves nothing on the old one", async (t) => {
  const app = await deployed();
  t.true((await labelled("ps", app.id)).length > 0);
  // The new server's agent is not connected: nothing runs there until a deployment.
  const other = await s.c.addServer({ start: false });
  const moved = await s.manage(`/applications/${app.id}`, {
    method: "PATCH",
    body: { server_id: other.serverId },
  });
  t.is(moved.status, 200, describe(moved));
  await pollUntil(
    async () =>
      (await labelled("ps", app.id)).length === 0 && (await labelled("images", app.id)).length === 0
        ? true
        : undefined,
    { timeoutMs: DEPLOY_WAIT_MS, what: "the old server's containers and images of the application removed" },
  );
  const events = await cleanupEvents(app.id);
  t.is(events.length, 1, "audited");
  t.is(events[0]!.payload.reason, "application moved to another server");
  await pollUntil(async () => ((await pendingRows(app.id)).length === 0 ? true : undefined), {
    timeoutMs: 30_000,
    what: "the old server's cleanup no longer pending",
  });
  // The application lives on, on its new server.
  const after = await s.manage(`/applications/${app.id}`);
  t.like(after.json, { server_id: other.serverId, live_release: null });
});

test.serial(
  "reboot - the live container stopped by a reboot is started by the agent when it comes back",
  async (t) => {
    const app = await deployed();
    const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
    const agent = s.c.agent;
    // The agent has recorded this boot (its first look at its containers).
    const recorded = join(agent.stateDir, "containers-boot-id");
    const boot = readFileSync(bootFile, "utf8").trim();
    await pollUntil(
      () => (existsSync(recorded) && readFileSync(recorded, "utf8").trim() === boot ? true : undefined),
      { timeoutMs: REPORT_MS, what: "the agent's record of this boot" },
    );
    // What a reboot does here: the agent and the container go down, the boot id changes.
    await agent.stop();
    await podman(["stop", "-t", "0", name]);
    t.is((await inspect(name)).status, "exited");
    writeFileSync(bootFile, `${randomUUID()}\n`);
    await agent.start();
    await pollUntil(async () => ((await inspect(name)).status === "running" ? true : undefined), {
      timeoutMs: REPORT_MS,
      what: `${name} started by the agent after the reboot`,
    });
    await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "the live release serving through Caddy again",
    });
    const back = await reported(
      app.id,
      "running reported again",
      (c) => c.state === "running" && c.name === name,
    );
    t.is(back.name, name);
  },
);

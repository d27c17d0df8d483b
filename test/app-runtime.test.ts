// The running application (issue 29), with podman, a real agent over gRPC and
// Caddy: a deployed app runs with a restart policy, so a killed app process
// comes back on its own and serves through the proxy again; the agent reports
// its container (state, restart count, last crash) and a crash loop; deleting
// the application removes its containers and images, at once when the agent is
// connected and at its next connection when it was away, and moving it to
// another server removes them from the old one. A crash loop is held by the
// agent (podman restarts at once): stopped, then started again after a hold that
// doubles, and kept across an agent restart. Serial: two tests stop the stack's
// only agent.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import test from "ava";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { appImageIds, inspectState as inspect, killApp, killAppProcess, podman } from "./harness/containers";
import { type App, DEPLOY_WAIT_MS, type DeployStack, startDeployStack } from "./harness/deploy-stack";
import { createAppRepo } from "./harness/git-repo";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

/** The agent polls every 5 s; a loaded machine can take a few polls more. */
const REPORT_MS = 60_000;
/** The agent's first hold of a crash loop here (RELAYCTL_AGENT_CRASH_HOLD_SECONDS); the next is twice as long. */
const HOLD_S = 3;

interface Container {
  name: string;
  state: string;
  exit_code: number | null;
  restart_count: number;
  last_crash_at: string | null;
  since: string | null;
  held_until: string | null;
  reported_at: string;
}

/** The machine's boot id, in a file of the test's: a "reboot" writes a new one. */
const bootFile = join(makeTempDir("app-runtime"), "boot_id");
writeFileSync(bootFile, `${randomUUID()}\n`);

let s: DeployStack;
test.before(async () => {
  s = await startDeployStack({
    agentEnv: {
      RELAYCTL_AGENT_BOOT_ID_FILE: bootFile,
      RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: "1",
      RELAYCTL_AGENT_CRASH_HOLD_SECONDS: String(HOLD_S),
    },
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

/** Polls the container until its state is `status`; that inspection. */
const untilStatus = (name: string, status: string, what: string) =>
  pollUntil(
    async () => {
      const now = await inspect(name);
      return now.status === status ? now : undefined;
    },
    { timeoutMs: REPORT_MS, intervalMs: 100, what },
  );

/** The host's NAT rules that name the container (podman's published-port DNAT, by container id). */
async function natRulesOf(name: string): Promise<string[]> {
  const id = (await podman(["container", "inspect", name, "--format", "{{.Id}}"])).stdout.trim();
  const rules = await run("iptables", ["-t", "nat", "-S"]);
  return rules.stdout.split("\n").filter((line) => line.includes(id));
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
  // No policy of podman's: the agent restarts it (agent deploy/start-step.ts says why).
  const policy = await podman([
    "container",
    "inspect",
    first.name,
    "--format",
    "{{.HostConfig.RestartPolicy.Name}}",
  ]);
  t.true(["", "no"].includes(policy.stdout.trim()), `restart policy '${policy.stdout.trim()}'`);

  await killApp(first.name);
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

/** Kills the app's process as killApp does, without waiting for its restart (the agent may hold it). */
async function crash(name: string): Promise<void> {
  // Running (the agent may still be starting it from the crash before).
  const before = await untilStatus(name, "running", `${name} running`);
  await killAppProcess(before.pid);
  await pollUntil(async () => ((await inspect(name)).pid !== before.pid ? true : undefined), {
    timeoutMs: 30_000,
    intervalMs: 50,
    what: `${name}'s crashed process gone`,
  });
}

/** Waits for the agent's hold of a crash loop: left down, then started again; the time it stayed down. */
async function held(name: string): Promise<number> {
  await untilStatus(name, "exited", `${name} down (a crash loop held)`);
  const back = await untilStatus(name, "running", `${name} started again by the agent after its hold`);
  return back.started - back.finished;
}

/** The agent's crash holds, as its state dir keeps them (containers/crash-hold.ts). */
function holdsOnDisk(): Record<string, { container: string; level: number; until: number }> {
  const file = join(s.c.agent.stateDir, "crash-holds.json");
  return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {};
}

/**
 * Waits until the agent holds the application's container: an exit is seen by the test at
 * once, the agent's hold at its next look.
 */
const heldOnDisk = (appId: string, name: string) =>
  pollUntil(
    () => {
      const h = holdsOnDisk()[appId];
      return h?.container === name && h.until > 0 ? h : undefined;
    },
    { timeoutMs: REPORT_MS, intervalMs: 100, what: `${name}'s hold on disk` },
  );

test.serial("running app - three crashes within 5 minutes are reported as a crash loop", async (t) => {
  const app = await deployed();
  const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
  for (let i = 0; i < 2; i++) await killApp(name);
  // The third crash makes the loop, which the agent holds: not waited for as running again.
  await crash(name);
  // Two restarts by the agent; the third crash is held, not restarted at once.
  const loop = await reported(
    app.id,
    "crash_loop reported",
    (c) => c.state === "crash_loop" && c.restart_count === 2 && c.held_until !== null,
  );
  t.truthy(loop.last_crash_at);
});

test.serial(
  "running app - a crash loop is held: left down, started after its hold, twice as long the next time, across an agent restart",
  async (t) => {
    const app = await deployed();
    const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
    for (let i = 0; i < 3; i++) await crash(name);
    // Podman would restart it at once, for ever; the agent leaves it down and starts it HOLD_S
    // later, and says until when in its report.
    const [during, first, [hold, rulesGone]] = await Promise.all([
      reported(app.id, "the hold reported", (c) => c.held_until !== null),
      held(name),
      // Down, it holds nothing of the host's: no DNAT rule sends its published port's traffic
      // to its dead address (podman's own restarts and a stop between them left them behind).
      heldOnDisk(app.id, name).then(
        async (h) =>
          [
            h,
            await pollUntil(async () => ((await natRulesOf(name)).length === 0 ? true : undefined), {
              timeoutMs: 1500,
              intervalMs: 100,
              what: "the held container's NAT rules removed from the host",
            }),
          ] as const,
      ),
    ]);
    t.true(rulesGone, "no NAT rule of the held container left on the host");
    t.true(first >= HOLD_S * 1000, `down ${first} ms, the first hold is ${HOLD_S} s`);
    // The first hold, not a later one: by its level, not by how long the start after it took
    // (a machine whose forks take 8 ms started it 10 s after its hold's end, under a full run).
    t.is(hold.level, 1, "the first hold");
    t.is(during.state, "crash_loop");
    const heldFor = Date.parse(during.held_until!) - Date.parse(during.reported_at);
    t.true(
      heldFor > 0 && heldFor <= HOLD_S * 1000,
      `held_until ${during.held_until}, reported ${during.reported_at}: within the first hold`,
    );
    await reported(
      app.id,
      "the hold's end reported",
      (c) => c.held_until === null && c.state === "crash_loop",
    );
    await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "the app serving through Caddy after its hold",
    });
    // One more crash within the loop's window: held again, twice as long; the agent restarts
    // during the hold and still starts the container when it is over (the hold is on disk).
    await crash(name);
    await heldOnDisk(app.id, name);
    await s.c.agent.stop();
    await s.c.agent.start();
    const second = await held(name);
    t.true(second >= 2 * HOLD_S * 1000, `down ${second} ms, the second hold is ${2 * HOLD_S} s`);
    // The restarted agent's tracker starts clean (crashes before it are history): running again.
    const report = await reported(
      app.id,
      "running again after its holds",
      (c) => c.state === "running" && c.name === name,
    );
    t.is(report.held_until, null, "the hold's end reported");
    // A container that runs again serves again: nothing was lost to the holds.
    await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "the app serving through Caddy after its second hold",
    });
  },
);

test.serial(
  "running app - a deployment during a hold serves the new release; the held container and its hold go with the old one",
  async (t) => {
    const app = await deployed();
    const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
    for (let i = 0; i < 3; i++) await crash(name);
    await heldOnDisk(app.id, name);
    t.is((await inspect(name)).status, "exited", "held: down");
    const holds = holdsOnDisk;
    const d = await s.deployAndWait(app.id);
    t.is(d.op.json.status, "completed", describe(d.op));
    await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "the new release serving through Caddy",
    });
    // The deployment retires the old container; the next look drops its hold.
    await pollUntil(async () => (!(await s.containersOf(app.id)).includes(name) ? true : undefined), {
      timeoutMs: DEPLOY_WAIT_MS,
      what: `${name} retired`,
    });
    await pollUntil(() => (holds()[app.id] === undefined ? true : undefined), {
      timeoutMs: REPORT_MS,
      what: "the hold dropped with its container",
    });
    // A report sent before the hold was dropped may still say it: the next one after the drop must not.
    const now = await reported(
      app.id,
      "the new container reported without the old one's hold",
      (c) => c.name !== name && c.held_until === null,
    );
    t.is(now.held_until, null);
  },
);

test.serial(
  "running app - a deployment that fails during a hold leaves the held container live, started when its hold is over",
  async (t) => {
    const repo = await createAppRepo();
    const app = await s.createApp({ health_check_timeout_seconds: 3 }, repo);
    const first = await s.deployAndWait(app.id);
    t.is(first.op.json.status, "completed", describe(first.op));
    const { name } = await reported(app.id, "running reported", (c) => c.state === "running");
    for (let i = 0; i < 3; i++) await crash(name);
    await held(name);
    // A fourth crash: the second hold (2 × HOLD_S), long enough for the new container below to
    // run while the old one is held.
    await crash(name);
    await heldOnDisk(app.id, name);
    const broken = await repo.commitBroken("broken");
    const failed = await s.deployAndWait(app.id, { commit_ref: broken.sha });
    t.is(failed.op.json.status, "failed", "the new release never answers its health check");
    // The held container is still the application's: started when its hold is over, serving.
    await untilStatus(name, "running", `${name} started again after its hold, the failed deployment gone`);
    await pollUntil(async () => ((await proxyGet(s.proxyPort, app.fqdn)).status === 200 ? true : undefined), {
      timeoutMs: 30_000,
      what: "the old release serving through Caddy again",
    });
    t.deepEqual(await s.containersOf(app.id), [name], "only the old release's container is left");
  },
);

test.serial(
  "running app - a first release that exits as it starts fails its health check for it: the agent does not start it again under the check",
  async (t) => {
    const repo = await createAppRepo();
    const crashing = await repo.commitCommand("exits", ["sh", "-c", "sleep 0.3; exit 3"]);
    const app = await s.createApp({ health_check_timeout_seconds: 60 }, repo);
    const d = await s.deployAndWait(app.id, { commit_ref: crashing.sha });
    t.is(d.op.json.status, "failed", describe(d.op));
    // Its exit is the reason, not the 60 s without an answer: the watcher (every second here)
    // left the new container, the application's only one, down for its health check to see.
    // "exited" whether podman's inspect said exited or, before its cleanup ran, stopped.
    t.regex(
      String(d.op.json.error),
      /health_check: the container stopped \(exited with code 3\)/,
      describe(d.op),
    );
    const started = s.c.agent
      .logText()
      .split("\n")
      .filter((line) => line.includes("crashed container started again") && line.includes(app.id));
    t.deepEqual(started, [], `no restart of the new container by the agent; ${describe(d.op)}`);
    t.deepEqual(await s.containersOf(app.id), [], "the failed release's container removed");
  },
);

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
    await untilStatus(name, "running", `${name} started by the agent after the reboot`);
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

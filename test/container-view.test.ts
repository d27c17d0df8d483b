// The route sync's container view (agent/src/engine/container-view.ts) against a
// real `podman system service` on a socket of its own: built from one list, kept
// by the event stream, caught up before each check, so that what the CLI did
// before a check is what the check sees, with no list per sync. Containers are
// changed with the podman CLI and checked at once, with no wait for the events:
// the race the catch-up closes.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import http from "node:http";
import { join } from "node:path";
import test from "ava";
import { ContainerView } from "../agent/src/engine/container-view";
import { EngineApi } from "../agent/src/engine/engine-api";
import { podmanEventsLogPath } from "../agent/src/engine/events-file";
import { PodmanEngine } from "../agent/src/engine/podman-engine";
import { PortCheck } from "../agent/src/jobs/port-check";
import type { DesiredRoute } from "../reverse-proxy-sync/src/route";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { EngineRelay } from "./harness/engine-relay";
import { BASE_IMAGE, buildBaseImage, podman, podmanAgentEnv, publishedPort } from "./harness/containers";
import { freePort } from "./harness/ports";
import { pollUntil } from "./harness/wait";

/**
 * Counts the inspects asked by container name (the port check's), apart from the view's by id;
 * `holdIds` keeps the view's (by id) from reaching the engine until `releaseIds`: a slow engine.
 */
class CountingApi extends EngineApi {
  byName: string[][] = [];
  #held: Promise<void> | undefined;
  #release: (() => void) | undefined;

  holdIds(): void {
    this.#held = new Promise((resolve) => {
      this.#release = resolve;
    });
  }

  releaseIds(): void {
    this.#release?.();
    this.#held = undefined;
  }

  override async inspect(names: string[], deadlineSeconds: number) {
    if (!names.every((n) => /^[0-9a-f]{64}$/.test(n))) this.byName.push(names);
    else await this.#held;
    return super.inspect(names, deadlineSeconds);
  }
}

let socketPath: string;
let service: ChildProcess;

const ping = () =>
  new Promise<true | undefined>((resolve) => {
    const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200 ? true : undefined));
    });
    req.on("error", () => resolve(undefined));
  });

async function startService(): Promise<void> {
  service = spawn("podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env: process.env,
    stdio: "ignore",
  });
  await pollUntil(ping, { what: `podman system service on ${socketPath}`, timeoutMs: 15_000 });
}

async function stopService(): Promise<void> {
  if (service.exitCode !== null || service.signalCode !== null) return;
  const exited = once(service, "exit");
  service.kill("SIGTERM");
  await exited;
}

test.before(async () => {
  Object.assign(process.env, podmanAgentEnv);
  socketPath = join(makeTempDir("podman-view"), "podman.sock");
  await Promise.all([buildBaseImage(), startService()]);
  onCleanup(stopService);
});
test.after.always(cleanupAll);

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}`;

/**
 * A container publishing container port 8001 on `hostPort` (podman's pick when undefined, then
 * read back). With a port given, nothing more is asked of podman: the caller checks at once.
 */
async function run(name: string, hostPort?: number): Promise<number> {
  const publish = `127.0.0.1:${hostPort ?? ""}:8001`;
  await podman(["run", "-d", "--init", "--name", name, "-p", publish, BASE_IMAGE, "sleep", "2147483647"]);
  return hostPort ?? publishedPort(name, 8001);
}

function track(name: string): void {
  onCleanup(() => podman(["rm", "-f", "-i", "-t", "0", name]).then(() => undefined));
}

/** Another free host port than `not` (the recreated container must move). */
async function otherPort(not: number): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p !== not) return p;
  }
}

const route = (containerName: string, containerPort: number): DesiredRoute => ({
  applicationId: `app-${containerName}`,
  containerName,
  containerPort,
  imageTag: "example.test/web:1",
  fqdns: [`${containerName}.example.test`],
});

function setup(path = socketPath) {
  const api = new CountingApi("podman", path);
  // As the agent builds it: with podman's events file (this machine's: the `file` logger).
  const view = new ContainerView(api, podmanEventsLogPath());
  const check = new PortCheck(new PodmanEngine(), "host", api, view);
  const done = () => {
    view.close();
    api.close();
  };
  return { api, view, check, done };
}

test.serial(
  "container view - a container started after the view was built is routable, with no list",
  async (t) => {
    const { api, view, check, done } = setup();
    try {
      t.true(await view.current());
      t.is(view.stats.lists, 1);
      const name = unique("view-new");
      track(name);
      const hostPort = await run(name);
      t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${hostPort}` }]);
      t.is(view.stats.lists, 1, "no list after the build");
      t.deepEqual(api.byName, [], "a hit asks nothing by name");
    } finally {
      done();
    }
  },
);

test.serial("container view - a removed container is refused, after the engine was asked once", async (t) => {
  const relay = new EngineRelay(socketPath);
  await relay.listen();
  const { api, view, check, done } = setup(relay.path);
  try {
    const name = unique("view-gone");
    track(name);
    const hostPort = await run(name);
    t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${hostPort}` }]);
    relay.hold();
    await podman(["rm", "-f", "-t", "0", name]);
    const [v] = await check.verdicts([route(name, 8001)]);
    relay.release();
    t.deepEqual(v, { error: `no container is named '${name}' on this server` });
    t.deepEqual(api.byName, [[name]]);
    t.is(view.stats.lists, 1);
  } finally {
    done();
  }
});

test.serial(
  "container view - removed and created again under its name on another port: the new port, never the old",
  async (t) => {
    const relay = new EngineRelay(socketPath);
    await relay.listen();
    const { view, check, done } = setup(relay.path);
    try {
      const name = unique("view-again");
      track(name);
      let hostPort = await run(name);
      t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${hostPort}` }]);
      for (let round = 0; round < 3; round++) {
        const old = hostPort;
        const next = await otherPort(old);
        // The stream has not told the view yet (held back, and checked at once): the catch-up must.
        relay.hold();
        await podman(["rm", "-f", "-t", "0", name]);
        hostPort = await run(name, next);
        t.not(hostPort, old);
        const [byContainerPort, byOldHostPort] = await check.verdicts([route(name, 8001), route(name, old)]);
        relay.release();
        t.deepEqual(byContainerPort, { upstream: `127.0.0.1:${hostPort}` }, `round ${round}`);
        t.true(byOldHostPort !== undefined && "error" in byOldHostPort, `round ${round}: the old host port`);
      }
      t.is(view.stats.lists, 1);
      t.true(view.stats.fileCatchUps >= 3, "caught up from podman's events file");
    } finally {
      done();
    }
  },
);

test.serial(
  "container view - a check waits only for the inspects of the containers it names; another's change is a miss, never its old facts",
  async (t) => {
    const relay = new EngineRelay(socketPath);
    await relay.listen();
    const { api, view, check, done } = setup(relay.path);
    try {
      const asked = unique("view-asked");
      const other = unique("view-other");
      track(asked);
      track(other);
      const [askedPort, first] = await Promise.all([run(asked), run(other)]);
      t.deepEqual(await check.verdicts([route(asked, 8001), route(other, 8001)]), [
        { upstream: `127.0.0.1:${askedPort}` },
        { upstream: `127.0.0.1:${first}` },
      ]);
      relay.hold();
      api.holdIds();
      // The same container (same id) stops: its facts in the view say running on `first`.
      await podman(["stop", "-t", "0", other]);
      // The other container's inspects are held: a check of the asked one must not wait for them.
      const deadline = new Promise<"waited">((resolve) =>
        setTimeout(() => resolve("waited"), 10_000).unref(),
      );
      t.deepEqual(await Promise.race([check.verdicts([route(asked, 8001)]), deadline]), [
        { upstream: `127.0.0.1:${askedPort}` },
      ]);
      t.is(view.lookup(other), undefined, "the other container's old facts are not served");
      // A check that names it waits for its inspect (released here) and refuses it.
      const named = check.verdicts([route(other, 8001)]);
      api.releaseIds();
      relay.release();
      const [v] = await named;
      t.regex(String(v && "error" in v ? v.error : v?.upstream), /is not running/);
      t.is(view.stats.lists, 1);
    } finally {
      api.releaseIds();
      done();
    }
  },
);

test.serial(
  "container view - the engine restarted (stream dropped): resynced with one list, still correct",
  async (t) => {
    const { view, check, done } = setup();
    try {
      const name = unique("view-restart");
      track(name);
      const first = await run(name);
      t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${first}` }]);
      t.is(view.stats.lists, 1);
      await stopService();
      // Changed while no service runs: no event reaches the view through the socket.
      await podman(["rm", "-f", "-t", "0", name]);
      const second = await run(name, await otherPort(first));
      await startService();
      t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${second}` }]);
      t.is(view.stats.lists, 2, "one resync");
      // And kept live again from the new stream: a removal is seen with no further list.
      await podman(["rm", "-f", "-t", "0", name]);
      const [v] = await check.verdicts([route(name, 8001)]);
      t.true(v !== undefined && "error" in v);
      t.is(view.stats.lists, 2);
    } finally {
      done();
    }
  },
);

test.serial(
  "container view - misses (unknown, stopped, port not published) are asked of the engine in one call",
  async (t) => {
    const { api, view, check, done } = setup();
    try {
      const running = unique("view-miss-run");
      const stopped = unique("view-miss-stop");
      track(running);
      track(stopped);
      const [hostPort] = await Promise.all([run(running), run(stopped)]);
      await podman(["stop", "-t", "0", stopped]);
      const verdicts = await check.verdicts([
        route(running, 8001),
        route(running, 7777),
        route(stopped, 8001),
        route("no-such-container-view", 8001),
      ]);
      t.deepEqual(verdicts[0], { upstream: `127.0.0.1:${hostPort}` });
      t.regex(String((verdicts[1] as { error: string }).error), /does not publish port 7777/);
      t.regex(String((verdicts[2] as { error: string }).error), /is not running/);
      t.regex(String((verdicts[3] as { error: string }).error), /no container is named/);
      t.deepEqual(api.byName, [[running, stopped, "no-such-container-view"]], "one inspect for the misses");
      t.is(view.stats.lists, 1);
    } finally {
      done();
    }
  },
);

test.serial("container view - no socket: no view, the CLI's verdicts as before", async (t) => {
  const api = new EngineApi("podman", join(makeTempDir("no-socket"), "podman.sock"));
  const view = new ContainerView(api);
  try {
    t.false(await view.current());
    const name = unique("view-cli");
    track(name);
    const hostPort = await run(name);
    const check = new PortCheck(new PodmanEngine(), "host", api, view);
    t.deepEqual(await check.verdicts([route(name, 8001)]), [{ upstream: `127.0.0.1:${hostPort}` }]);
  } finally {
    view.close();
    api.close();
  }
});

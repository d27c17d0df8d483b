// The route sync's port check through the engine's API socket (a real `podman
// system service`) must decide exactly as through the CLI: the same upstream for
// every route the container serves, the same refusal (and message) for every one it
// does not, and the CLI's answers when the socket is not there. Both container
// lists the socket serves (docker's compatible one, podman's own, which the agent
// picks on podman) are asked, and must not change a verdict either; nor must the container
// view built from either (agent/src/engine/container-view.ts).
import { spawn } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import test from "ava";
import { ContainerView } from "../agent/src/engine/container-view";
import { EngineApi, type EngineApiOptions } from "../agent/src/engine/engine-api";
import { PodmanEngine } from "../agent/src/engine/podman-engine";
import { PortCheck, portVerdict } from "../agent/src/jobs/port-check";
import type { DesiredRoute } from "../reverse-proxy-sync/src/route";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import {
  BASE_IMAGE,
  type WebContainer,
  buildBaseImage,
  podman,
  podmanAgentEnv,
  startWebContainer,
} from "./harness/containers";
import { freePort } from "./harness/ports";
import { pollUntil } from "./harness/wait";

let socketPath: string;
let web: WebContainer;
let stopped: WebContainer;
let ranged: RangeContainer;

/** Container ports 9000-9002 published on three consecutive host ports from `hostPort`. */
interface RangeContainer {
  name: string;
  hostPort: number;
}

/** podman lists a published range as one mapping (`range: 3`); inspect shows each port. */
async function startRangeContainer(): Promise<RangeContainer> {
  await buildBaseImage();
  const name = `pcheck-range-${Math.random().toString(36).slice(2, 8)}`;
  onCleanup(() => podman(["rm", "-f", "-t", "0", name]).then(() => undefined));
  for (let attempt = 1; ; attempt++) {
    // The host range must be given (podman's random host ports are not consecutive, and the
    // test is about one published range): freePort, and another start when a port was taken.
    const hostPort = await freePort();
    try {
      const publish = `127.0.0.1:${hostPort}-${hostPort + 2}:9000-9002`;
      await podman(["run", "-d", "--init", "--name", name, "-p", publish, BASE_IMAGE, "sleep", "2147483647"]);
      return { name, hostPort };
    } catch (err) {
      // The two ports after a free one may be taken: another start on other ports.
      await podman(["rm", "-f", "-t", "0", name]).catch(() => undefined);
      if (attempt === 5) throw err;
    }
  }
}

const ping = () =>
  new Promise<true | undefined>((resolve) => {
    const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200 ? true : undefined));
    });
    req.on("error", () => resolve(undefined));
  });

test.before(async () => {
  // The CLI of this process (the fallback) must see the same containers.conf as the service.
  Object.assign(process.env, podmanAgentEnv);
  socketPath = join(makeTempDir("podman-api"), "podman.sock");
  const service = spawn("podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env: process.env,
    stdio: "ignore",
  });
  onCleanup(async () => {
    service.kill("SIGTERM");
  });
  [web, stopped, ranged] = await Promise.all([
    startWebContainer("pcheck", ["one", "two"], { expose: [9090] }),
    startWebContainer("pcheck-stopped", ["one"]),
    startRangeContainer(),
    pollUntil(ping, { what: `podman system service on ${socketPath}`, timeoutMs: 15_000 }),
  ]);
  await podman(["stop", "-t", "0", stopped.name]);
});
test.after.always(cleanupAll);

const route = (containerName: string, containerPort: number, i: number): DesiredRoute => ({
  applicationId: `app-${i}`,
  containerName,
  containerPort,
  imageTag: "example.test/web:1",
  fqdns: [`app-${i}.example.test`],
});

function routes(): DesiredRoute[] {
  return [
    [web.name, web.containerPort("one")], // published: the host port it is published on
    [web.name, web.hostPort("two")], // the host port itself
    [web.name, 9090], // exposed, not published: refused in host mode
    [web.name, 7777], // neither
    [stopped.name, stopped.containerPort("one")], // not running
    ["no-such-container-pcheck", 8001], // no container
    [ranged.name, 9001], // inside a published range: the host port it is published on
    [ranged.name, ranged.hostPort + 2], // the last host port of the range itself
  ].map(([name, port], i) => route(String(name), Number(port), i));
}

const lists: Record<string, EngineApiOptions> = {
  "the list the agent picks": {},
  "docker's compatible list": { list: "docker" },
  "podman's own list": { list: "libpod" },
};

for (const mode of ["host", "container-network"] as const) {
  test(`${mode}: the API socket gives the CLI's verdicts, through either container list`, async (t) => {
    const viaCli = await new PortCheck(new PodmanEngine(), mode).verdicts(routes());
    for (const [what, options] of Object.entries(lists)) {
      const api = new EngineApi("podman", socketPath, options);
      // And through the container view the agent keeps (container-view.ts), built from that list.
      const view = new ContainerView(api);
      try {
        t.deepEqual(await new PortCheck(new PodmanEngine(), mode, api).verdicts(routes()), viaCli, what);
        const check = new PortCheck(new PodmanEngine(), mode, api, view);
        t.deepEqual(await check.verdicts(routes()), viaCli, `${what}, through the view`);
        t.deepEqual(await check.verdicts(routes()), viaCli, `${what}, through the view caught up`);
        t.is(view.stats.lists, 1, what);
      } finally {
        view.close();
        api.close();
      }
    }
    if (mode === "host") {
      t.deepEqual(viaCli[0], { upstream: `127.0.0.1:${web.hostPort("one")}` });
      t.deepEqual(viaCli[1], { upstream: `127.0.0.1:${web.hostPort("two")}` });
      t.true("error" in viaCli[2]!);
      t.deepEqual(viaCli[6], { upstream: `127.0.0.1:${ranged.hostPort + 1}` });
      t.deepEqual(viaCli[7], { upstream: `127.0.0.1:${ranged.hostPort + 2}` });
    } else {
      t.deepEqual(viaCli[2], { upstream: `${web.name}:9090` });
      t.deepEqual(viaCli[6], { upstream: `${ranged.name}:9001` });
      t.regex(String((viaCli[7] as { error: string }).error), /does not expose port/);
    }
    t.regex(String((viaCli[4] as { error: string }).error), /is not running/);
    t.regex(String((viaCli[5] as { error: string }).error), /no container is named/);
  });
}

test("podman's socket is listed through podman's own API, and that list alone proves a port in a range", async (t) => {
  const api = new EngineApi("podman", socketPath);
  try {
    t.is(await api.listFlavour(15), "libpod");
    const listed = await api.list(15);
    const facts = listed?.get(ranged.name);
    t.deepEqual(
      [...(facts?.ports ?? [])],
      [9000, 9001, 9002].map((port, i) => [port, [{ hostIp: "127.0.0.1", hostPort: ranged.hostPort + i }]]),
    );
    t.deepEqual(portVerdict(facts!, ranged.name, 9001, "host"), {
      upstream: `127.0.0.1:${ranged.hostPort + 1}`,
    });
  } finally {
    api.close();
  }
});

test("the API answers inspect as the CLI does; a missing name makes the exit non-zero", async (t) => {
  const api = new EngineApi("podman", socketPath);
  try {
    const o = await api.inspect([web.name, "no-such-container-pcheck"], 15);
    t.is(o.status, "completed");
    t.is(o.exitCode, 1);
    t.regex(o.stderr, /no such container no-such-container-pcheck/);
    for (const list of ["docker", "libpod"] as const) {
      const listing = new EngineApi("podman", socketPath, { list });
      try {
        const listed = await listing.list(15);
        t.true(listed?.get(web.name)?.running, list);
        t.false(listed?.get(stopped.name)?.running, list);
        t.deepEqual(listed?.get(web.name)?.ports.get(web.containerPort("one")), [
          { hostIp: "127.0.0.1", hostPort: web.hostPort("one") },
        ]);
      } finally {
        listing.close();
      }
    }
  } finally {
    api.close();
  }
});

test("a socket that is not there: the CLI answers, with the same verdicts", async (t) => {
  const api = new EngineApi("podman", join(makeTempDir("no-socket"), "podman.sock"));
  try {
    t.is((await api.inspect([web.name], 15)).status, "failed");
    t.is(await api.list(15), undefined);
    await t.throwsAsync(api.listFlavour(15));
    const viaMissing = await new PortCheck(new PodmanEngine(), "host", api).verdicts(routes());
    const viaCli = await new PortCheck(new PodmanEngine(), "host").verdicts(routes());
    t.deepEqual(viaMissing, viaCli);
    t.deepEqual(viaMissing[0], { upstream: `127.0.0.1:${web.hostPort("one")}` });
  } finally {
    api.close();
  }
});

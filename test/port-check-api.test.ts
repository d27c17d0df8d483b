// The route sync's port check through the engine's API socket (a real `podman
// system service`) must decide exactly as through the CLI: the same upstream for
// every route the container serves, the same refusal (and message) for every one it
// does not, and the CLI's answers when the socket is not there.
import { spawn } from "node:child_process";
import http from "node:http";
import { join } from "node:path";
import test from "ava";
import { EngineApi } from "../agent/src/engine/engine-api";
import { PodmanEngine } from "../agent/src/engine/podman-engine";
import { PortCheck } from "../agent/src/jobs/port-check";
import type { DesiredRoute } from "../reverse-proxy-sync/src/route";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { type WebContainer, podman, podmanAgentEnv, startWebContainer } from "./harness/containers";
import { pollUntil } from "./harness/wait";

let socketPath: string;
let web: WebContainer;
let stopped: WebContainer;

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
  [web, stopped] = await Promise.all([
    startWebContainer("pcheck", ["one", "two"], { expose: [9090] }),
    startWebContainer("pcheck-stopped", ["one"]),
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
  ].map(([name, port], i) => route(String(name), Number(port), i));
}

for (const mode of ["host", "container-network"] as const) {
  test(`${mode}: the API socket gives the CLI's verdicts`, async (t) => {
    const api = new EngineApi("podman", socketPath);
    try {
      const viaApi = await new PortCheck(new PodmanEngine(), mode, api).verdicts(routes());
      const viaCli = await new PortCheck(new PodmanEngine(), mode).verdicts(routes());
      t.deepEqual(viaApi, viaCli);
      if (mode === "host") {
        t.deepEqual(viaApi[0], { upstream: `127.0.0.1:${web.hostPort("one")}` });
        t.deepEqual(viaApi[1], { upstream: `127.0.0.1:${web.hostPort("two")}` });
        t.true("error" in viaApi[2]!);
      } else {
        t.deepEqual(viaApi[2], { upstream: `${web.name}:9090` });
      }
      t.regex(String((viaApi[4] as { error: string }).error), /is not running/);
      t.regex(String((viaApi[5] as { error: string }).error), /no container is named/);
    } finally {
      api.close();
    }
  });
}

test("the API answers inspect as the CLI does; a missing name makes the exit non-zero", async (t) => {
  const api = new EngineApi("podman", socketPath);
  try {
    const o = await api.inspect([web.name, "no-such-container-pcheck"], 15);
    t.is(o.status, "completed");
    t.is(o.exitCode, 1);
    t.regex(o.stderr, /no such container no-such-container-pcheck/);
    const listed = await api.list(15);
    t.true(listed?.get(web.name)?.running);
    t.false(listed?.get(stopped.name)?.running);
  } finally {
    api.close();
  }
});

test("a socket that is not there: the CLI answers, with the same verdicts", async (t) => {
  const api = new EngineApi("podman", join(makeTempDir("no-socket"), "podman.sock"));
  try {
    t.is((await api.inspect([web.name], 15)).status, "failed");
    t.is(await api.list(15), undefined);
    const viaMissing = await new PortCheck(new PodmanEngine(), "host", api).verdicts(routes());
    const viaCli = await new PortCheck(new PodmanEngine(), "host").verdicts(routes());
    t.deepEqual(viaMissing, viaCli);
    t.deepEqual(viaMissing[0], { upstream: `127.0.0.1:${web.hostPort("one")}` });
  } finally {
    api.close();
  }
});

import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { EngineApi, dockerListedFacts, engineSocketPath, libpodListedFacts } from "./engine-api.js";

test("engine socket - DOCKER_HOST / CONTAINER_HOST naming a unix socket win", (t) => {
  t.is(engineSocketPath("docker", { DOCKER_HOST: "unix:///srv/d.sock" }, 1000), "/srv/d.sock");
  t.is(engineSocketPath("podman", { CONTAINER_HOST: "unix:///srv/p.sock" }, 1000), "/srv/p.sock");
  t.is(engineSocketPath("podman", { DOCKER_HOST: "unix:///srv/d.sock" }, 0), "/srv/d.sock");
  // docker's CLI does not read CONTAINER_HOST.
  t.is(engineSocketPath("docker", { CONTAINER_HOST: "unix:///srv/p.sock" }, 0), "/var/run/docker.sock");
});

test("engine socket - an engine reached over tcp or ssh has no socket here: the CLI answers", (t) => {
  t.is(engineSocketPath("docker", { DOCKER_HOST: "tcp://10.0.0.2:2376" }, 0), undefined);
  t.is(
    engineSocketPath("podman", { CONTAINER_HOST: "ssh://core@host/run/podman/podman.sock" }, 0),
    undefined,
  );
});

test("engine socket - the engines' default sockets", (t) => {
  t.is(engineSocketPath("docker", {}, 1000), "/var/run/docker.sock");
  t.is(engineSocketPath("podman", {}, 0), "/run/podman/podman.sock");
  t.is(
    engineSocketPath("podman", { XDG_RUNTIME_DIR: "/run/user/1000" }, 1000),
    "/run/user/1000/podman/podman.sock",
  );
  t.is(engineSocketPath("podman", {}, 1000), undefined);
});

// Entries as podman 4.3.1 lists them (trimmed): `-p 127.0.0.1:41000-41002:9000-9002 -p 41010:9010/udp`.
const libpodRange = {
  Names: ["rsm-range"],
  State: "running",
  Networks: ["podman"],
  Ports: [
    { host_ip: "127.0.0.1", container_port: 9000, host_port: 41000, range: 3, protocol: "tcp" },
    { host_ip: "", container_port: 9010, host_port: 41010, range: 1, protocol: "udp" },
  ],
};

test("container list - podman's own list: a published range is every port of it, udp is left out", (t) => {
  const facts = libpodListedFacts(libpodRange);
  t.is(facts?.name, "rsm-range");
  t.true(facts?.running);
  t.deepEqual(
    [...(facts?.ports ?? [])],
    [
      [9000, [{ hostIp: "127.0.0.1", hostPort: 41000 }]],
      [9001, [{ hostIp: "127.0.0.1", hostPort: 41001 }]],
      [9002, [{ hostIp: "127.0.0.1", hostPort: 41002 }]],
    ],
  );
});

test("container list - podman's own list: tcp among several protocols, no range, no address", (t) => {
  const facts = libpodListedFacts({
    Names: ["multi"],
    State: "exited",
    Ports: [
      { host_ip: "", container_port: 53, host_port: 5353, protocol: "tcp,udp" },
      { container_port: 80, host_port: 8080, range: 0, protocol: "" },
      { container_port: 65535, host_port: 1000, range: 2, protocol: "tcp" },
    ],
  });
  t.false(facts?.running);
  t.is(facts?.status, "exited");
  // The last mapping would run past port 65535: not a mapping podman makes, so not read.
  t.deepEqual(
    [...(facts?.ports ?? [])],
    [
      [53, [{ hostIp: "", hostPort: 5353 }]],
      [80, [{ hostIp: "", hostPort: 8080 }]],
    ],
  );
});

test("container list - a host-network container lists no ports in podman's own list", (t) => {
  const facts = libpodListedFacts({ Names: ["hostnet"], State: "running", Networks: [], Ports: null });
  t.is(facts?.ports.size, 0);
  t.is(libpodListedFacts({ Names: [], State: "running" }), undefined);
});

test("container list - docker's list: the leading / goes, only published tcp ports", (t) => {
  const facts = dockerListedFacts({
    Names: ["/web"],
    State: "running",
    HostConfig: { NetworkMode: "bridge" },
    Ports: [
      { IP: "127.0.0.1", PrivatePort: 8001, PublicPort: 20000, Type: "tcp" },
      { PrivatePort: 9090, Type: "tcp" },
      { PrivatePort: 9010, PublicPort: 41010, Type: "udp" },
    ],
  });
  t.is(facts?.name, "web");
  t.is(facts?.networkMode, "bridge");
  t.deepEqual([...(facts?.ports ?? [])], [[8001, [{ hostIp: "127.0.0.1", hostPort: 20000 }]]]);
});

/**
 * An engine API on a real unix socket that answers `_ping` and the two lists as
 * podman does (`podman`) or as docker's daemon does (`docker`: no Libpod header,
 * libpod's paths a 404). Records the paths asked.
 */
async function fakeEngine(t: import("ava").ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), "engine-api-"));
  const socketPath = join(dir, "engine.sock");
  const state = { as: "podman" as "podman" | "docker", asked: [] as string[] };
  const server = http.createServer((req, res) => {
    const path = req.url ?? "";
    state.asked.push(path);
    if (state.as === "podman") res.setHeader("Libpod-Api-Version", "4.3.1");
    if (path === "/_ping") return res.end("OK");
    if (path === "/containers/json?all=true") {
      return res.end(JSON.stringify([{ Names: ["/web"], State: "running", Ports: [] }]));
    }
    if (state.as === "podman" && path === "/v4.3.1/libpod/containers/json?all=true") {
      return res.end(JSON.stringify([{ ...libpodRange, Names: ["web"] }]));
    }
    res.statusCode = 404;
    res.end("Not Found\n");
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { socketPath, state, server };
}

const deadline = async (what: string, ok: () => Promise<boolean>) => {
  const until = Date.now() + 5000;
  while (!(await ok())) {
    if (Date.now() > until) throw new Error(`not within 5 s: ${what}`);
    await new Promise((r) => setImmediate(r));
  }
};

test("container list - podman's socket is asked once which engine it is, then listed through libpod", async (t) => {
  const engine = await fakeEngine(t);
  const api = new EngineApi("podman", engine.socketPath);
  t.teardown(() => api.close());
  t.is((await api.list(5))?.get("web")?.ports.get(9001)?.[0]?.hostPort, 41001);
  t.is((await api.list(5))?.size, 1);
  t.deepEqual(engine.state.asked, [
    "/_ping",
    "/v4.3.1/libpod/containers/json?all=true",
    "/v4.3.1/libpod/containers/json?all=true",
  ]);
});

test("container list - a socket whose engine is not podman is listed through docker's API", async (t) => {
  const engine = await fakeEngine(t);
  engine.state.as = "docker";
  const api = new EngineApi("docker", engine.socketPath);
  t.teardown(() => api.close());
  t.is(await api.listFlavour(5), "docker");
  t.true((await api.list(5))?.get("web")?.running);
  const pinned = new EngineApi("docker", engine.socketPath, { list: "libpod" });
  t.teardown(() => pinned.close());
  t.is(await pinned.list(5), undefined);
});

test("container list - another engine behind the same socket is asked again", async (t) => {
  const engine = await fakeEngine(t);
  const api = new EngineApi("podman", engine.socketPath);
  t.teardown(() => api.close());
  t.is(await api.listFlavour(5), "libpod");
  // Replaced on open connections: libpod's list is a 404 once (the caller inspects), then docker's.
  engine.state.as = "docker";
  t.is(await api.list(5), undefined);
  t.true((await api.list(5))?.get("web")?.running);
  t.is(await api.listFlavour(5), "docker");
  // Replaced after closing its connections (a restart): asked again before the next list.
  engine.state.as = "podman";
  engine.server.closeAllConnections();
  await deadline(
    "the closed connections forget the engine",
    async () => (await api.listFlavour(5)) === "libpod",
  );
  t.is((await api.list(5))?.get("web")?.ports.size, 3);
});

// The container view against an engine API on a real unix socket that answers as
// docker's daemon does (no Libpod header: the catch-up ends with `until`), with
// its containers, events log and live streams in the test's hands. The same view
// against a real podman service: test/container-view.test.ts.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import { EngineApi } from "./engine-api.js";
import { ContainerView } from "./container-view.js";

interface FakeContainer {
  name: string;
  running: boolean;
  hostPort: number;
}

async function fakeDocker(t: ExecutionContext) {
  const dir = mkdtempSync(join(tmpdir(), "container-view-"));
  const socketPath = join(dir, "docker.sock");
  const containers = new Map<string, FakeContainer>();
  const log: string[] = [];
  const streams = new Set<http.ServerResponse>();
  const state = { asked: [] as string[], inspectDelay: undefined as Promise<void> | undefined };
  const inspectDoc = (id: string, c: FakeContainer) => ({
    Id: id,
    Name: `/${c.name}`,
    State: { Status: c.running ? "running" : "exited", Running: c.running },
    HostConfig: { NetworkMode: "bridge" },
    NetworkSettings: { Ports: { "8001/tcp": [{ HostIp: "127.0.0.1", HostPort: String(c.hostPort) }] } },
  });
  const server = http.createServer(async (req, res) => {
    const path = req.url ?? "";
    state.asked.push(path);
    if (path === "/_ping") return res.end("OK");
    if (path === "/containers/json?all=true") {
      const list = [...containers].map(([id, c]) => ({
        Id: id,
        Names: [`/${c.name}`],
        State: c.running ? "running" : "exited",
        Ports: [{ PrivatePort: 8001, PublicPort: c.hostPort, Type: "tcp", IP: "127.0.0.1" }],
      }));
      return res.end(JSON.stringify(list));
    }
    if (path.startsWith("/events?filters=")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.flushHeaders();
      streams.add(res);
      res.on("close", () => streams.delete(res));
      return;
    }
    if (path.startsWith("/events?since=")) return res.end(log.map((l) => `${l}\n`).join(""));
    const m = /^\/containers\/([0-9a-z]+)\/json$/.exec(path);
    if (m) {
      const c = containers.get(m[1]!);
      // The answer is what the engine saw when asked, even if it is sent later.
      const doc = c && JSON.stringify(inspectDoc(m[1]!, { ...c }));
      await state.inspectDelay;
      if (doc) return res.end(doc);
      res.statusCode = 404;
      return res.end('{"message":"No such container"}');
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
  let clock = BigInt(Date.now()) * 1_000_000n;
  /** An event in the engine's log; `stream`: also sent on the live streams now. */
  const event = (id: string, action: string, stream: boolean) => {
    clock += 1000n;
    const line = JSON.stringify({
      Type: "container",
      Action: action,
      Actor: { ID: id },
      timeNano: 0,
    }).replace('"timeNano":0', `"timeNano":${clock}`);
    log.push(line);
    if (stream) for (const s of streams) s.write(`${line}\n`);
  };
  const api = new EngineApi("docker", socketPath);
  const view = new ContainerView(api);
  t.teardown(() => {
    view.close();
    api.close();
  });
  return { containers, event, state, streams, view };
}

const hostPortOf = (view: ContainerView, name: string) => view.lookup(name)?.ports.get(8001)?.[0]?.hostPort;

const until = async (what: string, ok: () => boolean) => {
  const deadline = Date.now() + 5000;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`not within 5 s: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

test("container view - docker: a change the stream has not delivered is read by the catch-up, up to now", async (t) => {
  const e = await fakeDocker(t);
  e.containers.set("a1", { name: "web", running: true, hostPort: 41001 });
  t.true(await e.view.current());
  t.is(hostPortOf(e.view, "web"), 41001);
  // Replaced under the same name; only the engine's log knows yet.
  e.containers.delete("a1");
  e.event("a1", "destroy", false);
  e.containers.set("b2", { name: "web", running: true, hostPort: 41002 });
  e.event("b2", "create", false);
  e.event("b2", "start", false);
  t.true(await e.view.current());
  t.is(hostPortOf(e.view, "web"), 41002);
  t.is(e.view.stats.lists, 1);
  const catchUp = e.state.asked.find((p) => p.startsWith("/events?since="));
  t.regex(String(catchUp), /^\/events\?since=\d+\.\d{9}&until=\d+\.\d{9}&filters=/);
});

test("container view - an event both streamed and caught up is applied once", async (t) => {
  const e = await fakeDocker(t);
  t.true(await e.view.current());
  e.containers.set("c3", { name: "api", running: true, hostPort: 41003 });
  e.event("c3", "start", true);
  await until("the streamed start applied", () => hostPortOf(e.view, "api") === 41003);
  t.is(e.view.stats.inspects, 1);
  t.true(await e.view.current());
  t.is(e.view.stats.inspects, 1, "the catch-up's copy of the start is a repeat");
  e.event("c3", "exec_start", false);
  t.true(await e.view.current());
  t.is(e.view.stats.inspects, 1, "an exec changes nothing the view keeps");
});

test("container view - an inspect answer overtaken by a later event is dropped", async (t) => {
  const e = await fakeDocker(t);
  t.true(await e.view.current());
  e.containers.set("d4", { name: "old", running: true, hostPort: 41004 });
  let answer!: () => void;
  e.state.inspectDelay = new Promise((resolve) => {
    answer = resolve;
  });
  e.event("d4", "start", true);
  await until("the inspect asked", () => e.view.stats.inspects === 1);
  // Removed while the inspect (which saw it running) is on its way back.
  e.containers.delete("d4");
  e.event("d4", "destroy", true);
  const current = e.view.current();
  answer();
  t.true(await current);
  t.is(e.view.lookup("old"), undefined);
});

test("container view - the stream ending, or a catch-up too long to trust, resyncs with one list", async (t) => {
  const e = await fakeDocker(t);
  e.containers.set("e5", { name: "web", running: true, hostPort: 41005 });
  t.true(await e.view.current());
  await until("the stream open", () => e.streams.size === 1);
  for (const s of e.streams) s.destroy();
  e.containers.set("e5", { name: "web", running: true, hostPort: 41006 });
  await until("the stream closed", () => e.streams.size === 0);
  t.true(await e.view.current());
  t.is(e.view.stats.lists, 2);
  t.is(hostPortOf(e.view, "web"), 41006);
  // docker keeps 256 events: a catch-up near that may have lost some.
  for (let i = 0; i < 250; i++) e.event(`x${i}`, "exec_start", false);
  t.true(await e.view.current());
  t.is(e.view.stats.lists, 3);
});

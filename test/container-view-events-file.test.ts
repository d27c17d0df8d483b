// The container view's catch-up from podman's events file (agent/src/engine/
// events-file.ts), against a real `podman system service` and podman CLI that
// both write an events log of this test's own (containers.conf
// events_logfile_path), so the test may replace and truncate it as podman's
// rotation would. The stream is held back (EngineRelay) in every check: what the
// CLI did before a check is seen only through the catch-up. A file read across a
// rotation or a truncation would miss the change and route to the old port.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync, renameSync, statSync, truncateSync, writeFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { promisify } from "node:util";
import test from "ava";
import { ContainerView } from "../agent/src/engine/container-view";
import { EngineApi } from "../agent/src/engine/engine-api";
import { podmanEventsLogPath } from "../agent/src/engine/events-file";
import { PodmanEngine } from "../agent/src/engine/podman-engine";
import { PortCheck } from "../agent/src/jobs/port-check";
import type { DesiredRoute } from "../reverse-proxy-sync/src/route";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { BASE_IMAGE, buildBaseImage } from "./harness/containers";
import { EngineRelay } from "./harness/engine-relay";
import { freePort } from "./harness/ports";
import { pollUntil } from "./harness/wait";

const execFileP = promisify(execFile);
const dir = makeTempDir("podman-events-file");
const conf = join(dir, "containers.conf");
const eventsLog = join(dir, "events.log");
const socketPath = join(dir, "podman.sock");
const env = { ...process.env, CONTAINERS_CONF: conf };
let service: ChildProcess;

const podman = (args: string[]) => execFileP("podman", args, { env, timeout: 120_000 });

const ping = () =>
  new Promise<true | undefined>((resolve) => {
    const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode === 200 ? true : undefined));
    });
    req.on("error", () => resolve(undefined));
  });

test.before(async () => {
  writeFileSync(
    conf,
    `[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\nevents_logger = "file"\nevents_logfile_path = "${eventsLog}"\n`,
  );
  await buildBaseImage();
  service = spawn("podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env,
    stdio: "ignore",
  });
  onCleanup(async () => {
    if (service.exitCode !== null || service.signalCode !== null) return;
    const exited = once(service, "exit");
    service.kill("SIGTERM");
    await exited;
  });
  await pollUntil(ping, { what: `podman system service on ${socketPath}`, timeoutMs: 15_000 });
});
test.after.always(cleanupAll);

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}`;

async function run(name: string, hostPort: number): Promise<void> {
  const publish = `127.0.0.1:${hostPort}:8001`;
  await podman(["run", "-d", "--init", "--name", name, "-p", publish, BASE_IMAGE, "sleep", "2147483647"]);
}

async function otherPort(not: number): Promise<number> {
  for (;;) {
    const p = await freePort();
    if (p !== not) return p;
  }
}

const route = (containerName: string): DesiredRoute => ({
  applicationId: `app-${containerName}`,
  containerName,
  containerPort: 8001,
  imageTag: "example.test/web:1",
  fqdns: [`${containerName}.example.test`],
});

/** A view on the relay (stream held back at will) that reads the test's events file. */
async function setup(t: { teardown: (f: () => void) => void }) {
  const relay = new EngineRelay(socketPath);
  await relay.listen();
  const api = new EngineApi("podman", relay.path);
  const view = new ContainerView(api, podmanEventsLogPath(env));
  const check = new PortCheck(new PodmanEngine(), "host", api, view);
  t.teardown(() => {
    view.close();
    api.close();
  });
  const name = unique("view-file");
  onCleanup(() => podman(["rm", "-f", "-i", "-t", "0", name]).then(() => undefined));
  const apiCatchUps = () => relay.count(/^GET \/events\?stream=false/);
  return { relay, view, check, name, apiCatchUps };
}

/** Removes `name` and runs it again on another port, the stream held back; returns the new port. */
async function recreate(relay: EngineRelay, name: string, old: number): Promise<number> {
  const next = await otherPort(old);
  relay.hold();
  await podman(["rm", "-f", "-t", "0", name]);
  await run(name, next);
  return next;
}

test.serial("events file - the path containers.conf names is the one found", (t) => {
  t.is(podmanEventsLogPath(env), eventsLog);
});

test.serial(
  "events file - proven once, then read instead of the engine: a recreated container at its new port",
  async (t) => {
    const { relay, view, check, name, apiCatchUps } = await setup(t);
    let port = await freePort();
    await run(name, port);
    t.deepEqual(await check.verdicts([route(name)]), [{ upstream: `127.0.0.1:${port}` }]);
    const asked = apiCatchUps();
    t.true(asked >= 1, "the build's catch-up asked the engine once, proving the file");
    for (let round = 0; round < 3; round++) {
      port = await recreate(relay, name, port);
      const [v] = await check.verdicts([route(name)]);
      relay.release();
      t.deepEqual(v, { upstream: `127.0.0.1:${port}` }, `round ${round}`);
    }
    t.is(apiCatchUps(), asked, "no catch-up asked of the engine after the proof");
    t.true(view.stats.fileCatchUps >= 3);
    t.is(view.stats.lists, 1);
  },
);

test.serial(
  "events file - rotated (a new file renamed over it): not read across, the engine's catch-up that sync",
  async (t) => {
    const { relay, view, check, name, apiCatchUps } = await setup(t);
    let port = await freePort();
    await run(name, port);
    t.deepEqual(await check.verdicts([route(name)]), [{ upstream: `127.0.0.1:${port}` }]);
    const asked = apiCatchUps();
    // As podman's rotation: a new file with the log's second half, renamed over it. Read from
    // the old offset, the change's events would lie before it (or past the end).
    const lines = readFileSync(eventsLog, "utf8").split("\n");
    writeFileSync(`${eventsLog}.new`, lines.slice(Math.floor(lines.length / 2)).join("\n"));
    renameSync(`${eventsLog}.new`, eventsLog);
    port = await recreate(relay, name, port);
    const [v] = await check.verdicts([route(name)]);
    relay.release();
    t.deepEqual(v, { upstream: `127.0.0.1:${port}` });
    t.is(apiCatchUps(), asked + 1, "one catch-up asked of the engine");
    // That catch-up proved the new file: the next change is read from it.
    const files = view.stats.fileCatchUps;
    port = await recreate(relay, name, port);
    const [w] = await check.verdicts([route(name)]);
    relay.release();
    t.deepEqual(w, { upstream: `127.0.0.1:${port}` });
    t.is(apiCatchUps(), asked + 1);
    t.is(view.stats.fileCatchUps, files + 1);
    t.is(view.stats.lists, 1);
  },
);

test.serial("events file - truncated and written past the old offset: not read across", async (t) => {
  const { relay, check, name, apiCatchUps } = await setup(t);
  let port = await freePort();
  await run(name, port);
  t.deepEqual(await check.verdicts([route(name)]), [{ upstream: `127.0.0.1:${port}` }]);
  const asked = apiCatchUps();
  const offset = statSync(eventsLog).size;
  const systemLine = readFileSync(eventsLog, "utf8")
    .split("\n")
    .find((l) => l.includes('"Type":"system"'));
  // The same file cut to nothing; the change's events land before the old offset, then
  // more lines push the file past it: a read from the old offset would see none of the change.
  truncateSync(eventsLog, 0);
  port = await recreate(relay, name, port);
  const filler = `${systemLine ?? '{"Status":"refresh","Time":"2026-01-01T00:00:00Z","Type":"system","Attributes":null}'}\n`;
  writeFileSync(eventsLog, filler.repeat(Math.ceil(offset / filler.length) + 2), { flag: "a" });
  t.true(statSync(eventsLog).size > offset);
  const [v] = await check.verdicts([route(name)]);
  relay.release();
  t.deepEqual(v, { upstream: `127.0.0.1:${port}` });
  t.is(apiCatchUps(), asked + 1, "one catch-up asked of the engine");
});

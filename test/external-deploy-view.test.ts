// External deploy through an agent whose engine has an API socket (CONTAINER_HOST on
// a `podman system service` of the test's own, through a relay that records every
// request): the agent's port check reads its container view (agent/src/engine/
// container-view.ts) and lists the containers once, not at each sync, while a
// container replaced under its name (another host port, another backend) between two
// syncs is routed to its new port and a removed one is refused.
import { type ChildProcess, spawn } from "node:child_process";
import { statSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import test from "ava";
import { podmanEventsLogPath } from "../agent/src/engine/events-file";
import { describe } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { BASE_IMAGE, buildBaseImage, podman, podmanAgentEnv, publishOnFreePort } from "./harness/containers";
import { EngineRelay } from "./harness/engine-relay";
import { waitForBackend } from "./harness/proxy-client";
import { type RouteStack, startRouteStack } from "./harness/route-stack";
import { pollUntil } from "./harness/wait";

let s: RouteStack;
let relay: EngineRelay;
const name = `xview-${Math.random().toString(36).slice(2, 8)}`;

test.before(async () => {
  const socketPath = join(makeTempDir("podman-xview"), "podman.sock");
  const env = { ...process.env, ...podmanAgentEnv };
  const service: ChildProcess = spawn("podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env,
    stdio: "ignore",
  });
  onCleanup(async () => {
    service.kill("SIGTERM");
  });
  const ping = () =>
    new Promise<true | undefined>((resolve) => {
      const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200 ? true : undefined));
      });
      req.on("error", () => resolve(undefined));
    });
  await Promise.all([
    buildBaseImage(),
    pollUntil(ping, { what: `podman system service on ${socketPath}`, timeoutMs: 15_000 }),
  ]);
  relay = new EngineRelay(socketPath);
  await relay.listen();
  s = await startRouteStack({
    proxy: "caddy",
    agentEnv: { ...podmanAgentEnv, CONTAINER_HOST: `unix://${relay.path}` },
  });
  onCleanup(() => podman(["rm", "-f", "-i", "-t", "0", name]).then(() => undefined));
});
test.after.always(cleanupAll);

/** `name` serving `backend <backend>` on container port 8001, published on a host port of its own. */
async function runWeb(backend: string): Promise<number> {
  const serve = `mkdir -p /www && printf 'backend ${backend}' > /www/index.html && httpd -p 8001 -h /www`;
  const { args, hostPort } = await publishOnFreePort(8001);
  await podman([
    ...["run", "-d", "--init", "--name", name, ...args, BASE_IMAGE],
    ...["sh", "-c", `${serve} && exec sleep 2147483647`],
  ]);
  // Serving on its own port first: the proxy's answers below are then about the route alone.
  await waitForBackend(hostPort, "direct.example.test", backend, 20_000);
  return hostPort;
}

const entry = (image: string) => ({
  container_name: name,
  container_port: 8001,
  image_tag: `registry.example.test/xview:${image}`,
  force: true,
});

// The view's list (the agent's container watcher lists too, with a label filter: podman's CLI
// goes through CONTAINER_HOST's socket as well).
const LIST = /^GET \/v[\d.]+\/libpod\/containers\/json\?all=true$/;
const CATCH_UP = /^GET \/events\?stream=false&since=/;

test.serial(
  "external deploy - with an engine API socket: one container list, a catch-up per sync, a replaced container's new port",
  async (t) => {
    // On podman's file events logger the agent's catch-ups read that file (once proven).
    const logger = (await podman(["info", "--format", "{{.Host.EventLogger}}"])).stdout.trim();
    const eventsLog = podmanEventsLogPath({ ...process.env, ...podmanAgentEnv })!;
    const inode = () => (logger === "file" ? statSync(eventsLog).ino : 0);
    const inodeBefore = inode();
    const firstPort = await runWeb("one");
    await s.createApplication({
      name: "xview",
      linked_container_name: name,
      container_port: 8001,
      fqdns: ["xview.example.test"],
    });
    const sess = await s.openSession({ container_names: [name] });
    t.is(sess.status, 201, describe(sess));
    const token = String(sess.json.session_token);
    const first = await s.sync(token, [entry("1")]);
    t.deepEqual(first.json.errors, [], describe(first));
    await waitForBackend(s.proxyPort, "xview.example.test", "one", 10_000);

    // Replaced under its name: another host port, another backend.
    await podman(["rm", "-f", "-t", "0", name]);
    const secondPort = await runWeb("two");
    t.not(secondPort, firstPort);
    const second = await s.sync(token, [entry("2")]);
    t.deepEqual(second.json.errors, [], describe(second));
    await waitForBackend(s.proxyPort, "xview.example.test", "two", 10_000);
    const config = (await s.caddy!.admin("GET", "/config/")).text;
    t.true(config.includes(`127.0.0.1:${secondPort}`));
    t.false(config.includes(`127.0.0.1:${firstPort}`));

    // Removed: refused, and the route stays as it was.
    await podman(["rm", "-f", "-t", "0", name]);
    const third = await s.sync(token, [entry("3")]);
    const errors = third.json.errors as { reason: string }[];
    t.is(errors.length, 1, describe(third));
    t.regex(errors[0]!.reason, /no container is named/);

    t.is(relay.count(LIST), 1, "the containers were listed once, for the view");
    t.is(relay.count(/^GET \/events\?filters=/), 1, "one event stream");
    const asked = relay.count(CATCH_UP);
    if (logger !== "file") t.true(asked >= 2, "a catch-up asked of the engine at each sync after the first");
    // The view's build asked once, proving podman's events file; every sync after it read the file.
    // Only a rotation of podman's log (shared with every test running) sends one more to the engine.
    else if (inode() === inodeBefore) t.is(asked, 1, "one catch-up asked of the engine: the file's proof");
    else t.true(asked === 1 || asked === 2, `${asked} catch-ups asked of the engine across a rotation`);
  },
);

import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ProxyStatus } from "@relayctl/proto";
import test from "ava";
import { ConfigError, type ProxyConfig, loadConfig } from "../config.js";
import { silentLogger } from "../log.js";
import { NONE_DETAIL, checkProxy, logMessage } from "./check.js";
import { ProxyMonitor, proxyWriteFailed } from "./proxy-monitor.js";

const dirs: string[] = [];
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), "proxy-status-"));
  dirs.push(dir);
  return dir;
};
test.after.always(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A loopback port nobody listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

const caddy = (adminUrl: string): ProxyConfig => ({
  kind: "caddy",
  upstream: "host",
  adminUrl,
  serverName: "relayctl",
  listen: undefined,
  automaticHttps: false,
});

test("config - RELAYCTL_AGENT_PROXY_RECHECK_SECONDS is 30 by default, 0 allowed, a bad value named", (t) => {
  t.is(loadConfig({}).proxyRecheckSeconds, 30);
  t.is(loadConfig({ RELAYCTL_AGENT_PROXY_RECHECK_SECONDS: "0" }).proxyRecheckSeconds, 0);
  const error = t.throws(() => loadConfig({ RELAYCTL_AGENT_PROXY_RECHECK_SECONDS: "soon" }), {
    instanceOf: ConfigError,
  });
  t.regex(error.message, /^RELAYCTL_AGENT_PROXY_RECHECK_SECONDS: /);
});

test("check - none is ok and says deployments only record where apps listen", async (t) => {
  const s = await checkProxy({ kind: "none", upstream: "host" });
  t.deepEqual(s, { kind: "none", ok: true, detail: NONE_DETAIL });
  t.regex(s.detail, /only record where applications listen/);
});

test("check - caddy whose admin API does not answer is not ok, with its address and the error", async (t) => {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const s = await checkProxy(caddy(url));
  t.is(s.kind, "caddy");
  t.false(s.ok);
  t.true(s.detail.startsWith(`caddy at ${url} is not answering: `), s.detail);
  t.regex(s.detail, /ECONNREFUSED/);
});

test("check - nginx needs its binary and a writable conf dir", async (t) => {
  const dir = tmp();
  const bin = join(dir, "nginx");
  writeFileSync(bin, "#!/bin/sh\n");
  chmodSync(bin, 0o755);
  const conf = join(dir, "conf.d");
  const nginx = (nginxBin: string, confDir: string): ProxyConfig => ({
    kind: "nginx",
    upstream: "host",
    confDir,
    listen: "80",
    nginxBin,
    configFile: undefined,
    prefix: undefined,
  });
  const missingBin = await checkProxy(nginx("nginx", dir), { path: join(dir, "nowhere") });
  t.deepEqual(missingBin, { kind: "nginx", ok: false, detail: "nginx binary nginx not found" });
  const missingDir = await checkProxy(nginx("nginx", conf), { path: dir });
  t.deepEqual(missingDir, { kind: "nginx", ok: false, detail: `nginx conf dir ${conf} does not exist` });
  const ok = await checkProxy(nginx(bin, dir));
  t.deepEqual(ok, { kind: "nginx", ok: true, detail: `nginx ${bin}, routes in ${dir}` });
});

test("check - traefik needs its dir writable", async (t) => {
  const dir = tmp();
  const traefik = (d: string): ProxyConfig => ({
    kind: "traefik",
    upstream: "host",
    dir: d,
    entryPoints: ["web"],
  });
  t.true((await checkProxy(traefik(dir))).ok);
  const gone = await checkProxy(traefik(join(dir, "gone")));
  t.false(gone.ok);
  t.is(gone.detail, `traefik dir ${join(dir, "gone")} does not exist`);
});

test("logMessage - down says what it costs; back says answering again", (t) => {
  const down: ProxyStatus = { kind: "caddy", ok: false, detail: "caddy at http://x is not answering: boom" };
  const up: ProxyStatus = { kind: "caddy", ok: true, detail: "caddy admin API at http://x answers" };
  t.is(
    logMessage(undefined, down),
    "reverse proxy: caddy at http://x is not answering: boom (deploys fail at switch until it is back)",
  );
  t.is(logMessage(down, up), "reverse proxy: caddy answering again");
  t.is(logMessage(undefined, up), "reverse proxy: caddy admin API at http://x answers");
});

/** A monitor over a scripted sequence of statuses (the check itself is tested above). */
function scripted(statuses: ProxyStatus[]) {
  let calls = 0;
  const monitor = new ProxyMonitor({
    proxy: caddy("http://127.0.0.1:1"),
    log: silentLogger(),
    recheckMs: 0,
    check: async () => statuses[Math.min(calls++, statuses.length - 1)]!,
  });
  const changes: ProxyStatus[] = [];
  monitor.on("change", (s) => changes.push(s));
  return { monitor, changes, calls: () => calls };
}

const UP: ProxyStatus = { kind: "caddy", ok: true, detail: "up" };
const DOWN: ProxyStatus = { kind: "caddy", ok: false, detail: "down" };

test("monitor - emits only changes, and current is the last check", async (t) => {
  const { monitor, changes } = scripted([UP, UP, DOWN, DOWN, UP]);
  t.is(monitor.current, undefined);
  for (let i = 0; i < 5; i++) await monitor.recheck();
  t.deepEqual(changes, [UP, DOWN, UP]);
  t.deepEqual(monitor.current, UP);
});

test("monitor - concurrent rechecks share one check", async (t) => {
  const { monitor, calls } = scripted([UP]);
  await Promise.all([monitor.recheck(), monitor.recheck(), monitor.recheck()]);
  t.is(calls(), 1);
});

test.serial("monitor - a failed route write checks again, at most every 2 s", async (t) => {
  const { monitor, changes, calls } = scripted([UP, DOWN]);
  monitor.start();
  t.teardown(() => monitor.stop());
  await monitor.recheck(); // the start's check, shared
  t.is(calls(), 1);
  // Right after a check a failure does not trigger another one: a burst of failures is one check.
  proxyWriteFailed();
  t.is(calls(), 1);
  // Once the last check is 2 s old, a failure checks again at once (polled, with a deadline).
  const deadline = Date.now() + 8000;
  while (changes.length < 2 && Date.now() < deadline) {
    proxyWriteFailed();
    await new Promise((r) => setTimeout(r, 100));
  }
  t.deepEqual(changes, [UP, DOWN]);
  t.is(calls(), 2);
  monitor.stop();
  proxyWriteFailed(); // no listener any more: nothing happens
  await new Promise((r) => setImmediate(r));
  t.is(calls(), 2);
});

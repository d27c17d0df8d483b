import test from "ava";
import { ConfigError, loadConfig } from "./config.js";

test("config - defaults match process-interfaces.md", (t) => {
  const config = loadConfig({});
  t.like(config, {
    stateDir: "/var/lib/relayctl-agent",
    gatewayUrls: undefined,
    outputCapBytes: 1_048_576,
    killGraceMs: 5000,
    backoff: { minMs: 250, maxMs: 15_000 },
    logLevel: "info",
    containerWatchSeconds: 5,
    crashHoldSeconds: 10,
  });
  t.regex(config.shell, /^\/bin\/(ba)?sh$/);
});

test("config - a crash loop's first hold: 0 turns holds off, at most 300 s", (t) => {
  t.is(loadConfig({ RELAYCTL_AGENT_CRASH_HOLD_SECONDS: "0" }).crashHoldSeconds, 0);
  t.is(loadConfig({ RELAYCTL_AGENT_CRASH_HOLD_SECONDS: "300" }).crashHoldSeconds, 300);
  t.throws(() => loadConfig({ RELAYCTL_AGENT_CRASH_HOLD_SECONDS: "301" }), {
    instanceOf: ConfigError,
    message: /^RELAYCTL_AGENT_CRASH_HOLD_SECONDS: /,
  });
});

test("config - gateway list is split and checked", (t) => {
  const config = loadConfig({ RELAYCTL_AGENT_GATEWAYS: "grpc://a:1, grpcs://b.example:8443" });
  t.deepEqual(config.gatewayUrls, ["grpc://a:1", "grpcs://b.example:8443"]);
  const error = t.throws(() => loadConfig({ RELAYCTL_AGENT_GATEWAYS: "http://a:1" }), {
    instanceOf: ConfigError,
  });
  t.regex(error.message, /^RELAYCTL_AGENT_GATEWAYS\.0: each gateway must be grpc:\/\/host:port/);
});

test("config - a bad number names the variable in one line", (t) => {
  const error = t.throws(() => loadConfig({ RELAYCTL_AGENT_OUTPUT_CAP_BYTES: "1MB" }), {
    instanceOf: ConfigError,
  });
  t.is(error.message, "RELAYCTL_AGENT_OUTPUT_CAP_BYTES: must be a whole number");
  t.throws(() => loadConfig({ RELAYCTL_AGENT_BACKOFF_MIN_MS: "900", RELAYCTL_AGENT_BACKOFF_MAX_MS: "100" }), {
    message: /BACKOFF_MIN_MS: must not be greater/,
  });
});

test("config - no proxy by default; caddy, nginx and traefik settings are parsed", (t) => {
  t.deepEqual(loadConfig({}).proxy, { kind: "none", upstream: "host" });
  t.deepEqual(
    loadConfig({
      RELAYCTL_AGENT_PROXY: "caddy",
      RELAYCTL_AGENT_CADDY_ADMIN_URL: "http://127.0.0.1:2020/",
      RELAYCTL_AGENT_CADDY_LISTEN: "127.0.0.1:8080, :8443",
      RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
      RELAYCTL_AGENT_PROXY_UPSTREAM: "container-network",
    }).proxy,
    {
      kind: "caddy",
      upstream: "container-network",
      adminUrl: "http://127.0.0.1:2020",
      serverName: "relayctl",
      listen: ["127.0.0.1:8080", ":8443"],
      automaticHttps: false,
    },
  );
  t.like(loadConfig({ RELAYCTL_AGENT_PROXY: "nginx", RELAYCTL_AGENT_NGINX_CONF_DIR: "/x" }).proxy, {
    kind: "nginx",
    confDir: "/x",
    listen: "80",
    nginxBin: "nginx",
  });
  t.deepEqual(
    loadConfig({ RELAYCTL_AGENT_PROXY: "traefik", RELAYCTL_AGENT_TRAEFIK_ENTRYPOINTS: "web,websecure" })
      .proxy,
    {
      kind: "traefik",
      upstream: "host",
      dir: "/etc/traefik/dynamic",
      entryPoints: ["web", "websecure"],
    },
  );
  t.throws(() => loadConfig({ RELAYCTL_AGENT_PROXY: "haproxy" }), { message: /^RELAYCTL_AGENT_PROXY: / });
  t.throws(() => loadConfig({ RELAYCTL_AGENT_NGINX_LISTEN: "80; include x" }), {
    message: /^RELAYCTL_AGENT_NGINX_LISTEN: /,
  });
});

test("config - deployment settings: drain 5 s, no network, --init, the agent's restarts by default", (t) => {
  t.deepEqual(loadConfig({}).deploy, {
    drainSeconds: 5,
    network: undefined,
    init: true,
    agentRestarts: true,
  });
  t.deepEqual(
    loadConfig({
      RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "0",
      RELAYCTL_AGENT_DEPLOY_NETWORK: "relayctl-net",
      RELAYCTL_AGENT_DEPLOY_INIT: "false",
      // No looks at the containers: podman's restart policy brings them back instead.
      RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: "0",
    }).deploy,
    { drainSeconds: 0, network: "relayctl-net", init: false, agentRestarts: false },
  );
  t.throws(() => loadConfig({ RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "-1" }), {
    message: /^RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: /,
  });
  t.throws(() => loadConfig({ RELAYCTL_AGENT_DEPLOY_NETWORK: "--privileged" }), {
    message: /^RELAYCTL_AGENT_DEPLOY_NETWORK: /,
  });
});

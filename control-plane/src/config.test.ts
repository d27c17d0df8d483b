import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { ConfigError, loadConfig } from "./config.js";

const base = { RELAYCTL_DATABASE_URL: "mysql://root@127.0.0.1:3306/x" };

test("config - defaults", (t) => {
  const c = loadConfig(base);
  t.is(c.role, "all");
  t.true(c.runsApi && c.runsGateway);
  t.deepEqual(c.apiListen, { host: "127.0.0.1", port: 8080 });
  t.is(c.execCeilingSeconds, 3600);
  t.is(c.leaseMs, 30_000);
  t.deepEqual(c.natsServers, ["nats://127.0.0.1:4222"]);
});

test("config - roles apart", (t) => {
  const c = loadConfig({ ...base, RELAYCTL_ROLE: "gateway" });
  t.false(c.runsApi);
  t.true(c.runsGateway);
});

test("config - bad values stop with one line naming the variable", (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{}, /RELAYCTL_DATABASE_URL: required: mysql:\/\//],
    [{ ...base, RELAYCTL_ROLE: "both" }, /RELAYCTL_ROLE/],
    [{ ...base, RELAYCTL_LEASE_MS: "soon" }, /RELAYCTL_LEASE_MS: must be a whole number/],
    [{ ...base, RELAYCTL_API_LISTEN: "8080" }, /RELAYCTL_API_LISTEN: must be host:port/],
    [{ ...base, RELAYCTL_BUS: "memory", RELAYCTL_ROLE: "api" }, /RELAYCTL_BUS: .*RELAYCTL_ROLE=all/],
    [{ ...base, RELAYCTL_TLS_CERT_FILE: "/x.pem" }, /both RELAYCTL_TLS_CERT_FILE and RELAYCTL_TLS_KEY_FILE/],
  ];
  for (const [env, re] of cases) {
    const err = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex(err.message, re);
    t.false(err.message.includes("\n"));
  }
});

test("config - plaintext gateway only on loopback unless allowed", (t) => {
  const open = { ...base, RELAYCTL_GATEWAY_LISTEN: "0.0.0.0:8443" };
  t.throws(() => loadConfig(open), { message: /plaintext on 0\.0\.0\.0 refused/ });
  t.notThrows(() => loadConfig({ ...open, RELAYCTL_ALLOW_PLAINTEXT: "true" }));
  t.notThrows(() => loadConfig({ ...open, RELAYCTL_ROLE: "api" }));
  t.notThrows(() =>
    loadConfig({ ...open, RELAYCTL_TLS_CERT_FILE: "/c.pem", RELAYCTL_TLS_KEY_FILE: "/k.pem" }),
  );
});

test("config - RELAYCTL_TRUST_PROXY=true is refused with what to set instead", (t) => {
  const err = t.throws(() => loadConfig({ ...base, RELAYCTL_TRUST_PROXY: "true" }), {
    instanceOf: ConfigError,
  });
  t.regex(err.message, /^RELAYCTL_TRUST_PROXY: .*every hop.*set RELAYCTL_TRUSTED_PROXIES/);
  t.false(loadConfig({ ...base, RELAYCTL_TRUST_PROXY: "false" }).trustProxy);
});

test("config - RELAYCTL_TRUSTED_PROXIES: addresses/CIDRs or a hop count; none by default", (t) => {
  t.false(loadConfig(base).trustProxy);
  t.deepEqual(loadConfig({ ...base, RELAYCTL_TRUSTED_PROXIES: "10.0.0.0/8, 127.0.0.1" }).trustProxy, [
    "10.0.0.0/8",
    "127.0.0.1",
  ]);
  t.is(loadConfig({ ...base, RELAYCTL_TRUSTED_PROXIES: "2" }).trustProxy, 2);
  t.throws(() => loadConfig({ ...base, RELAYCTL_TRUSTED_PROXIES: "lb.internal" }), {
    message: /RELAYCTL_TRUSTED_PROXIES: 'lb\.internal' is not an IPv4\/IPv6 address or CIDR range/,
  });
  t.throws(() => loadConfig({ ...base, RELAYCTL_TRUSTED_PROXIES: "0" }), { message: /hop count is 1 to 16/ });
});

test("config - HTTP timeouts have defaults and the headers timeout fits in the request timeout", (t) => {
  t.deepEqual(loadConfig(base).http, {
    requestTimeoutMs: 30_000,
    headersTimeoutMs: 10_000,
    connectionTimeoutMs: 960_000,
    maxHeaderBytes: 16_384,
  });
  t.throws(
    () =>
      loadConfig({
        ...base,
        RELAYCTL_HTTP_REQUEST_TIMEOUT_MS: "5000",
        RELAYCTL_HTTP_HEADERS_TIMEOUT_MS: "6000",
      }),
    { message: /RELAYCTL_HTTP_HEADERS_TIMEOUT_MS: must not exceed RELAYCTL_HTTP_REQUEST_TIMEOUT_MS/ },
  );
});

test("config - the GitHub App settings come all together, with a readable PEM key", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-gh-config-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const pem = join(dir, "app.pem");
  writeFileSync(
    pem,
    generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs1", format: "pem" }),
  );
  const notPem = join(dir, "not.pem");
  writeFileSync(notPem, "hello");
  const gh = {
    ...base,
    RELAYCTL_GITHUB_APP_ID: "12345",
    RELAYCTL_GITHUB_APP_SLUG: "relayctl",
    RELAYCTL_GITHUB_PRIVATE_KEY_FILE: pem,
    RELAYCTL_GITHUB_WEBHOOK_SECRET: "0123456789abcdef0123",
    RELAYCTL_GITHUB_CLIENT_ID: "Iv1.0123456789abcdef",
    RELAYCTL_GITHUB_CLIENT_SECRET: "0123456789abcdef0123456789abcdef01234567",
  };
  const c = loadConfig({ ...gh, RELAYCTL_GITHUB_API_URL: "https://ghe.example/api/v3/" });
  t.like(c.github, {
    appId: "12345",
    slug: "relayctl",
    apiUrl: "https://ghe.example/api/v3",
    webUrl: "https://github.com",
    clientId: "Iv1.0123456789abcdef",
    clientSecret: "0123456789abcdef0123456789abcdef01234567",
  });
  t.is(c.githubDeployTimeoutSeconds, 600);
  const cases: [Record<string, string | undefined>, RegExp][] = [
    [{ ...gh, RELAYCTL_GITHUB_WEBHOOK_SECRET: undefined }, /set all of RELAYCTL_GITHUB_APP_ID/],
    [{ ...gh, RELAYCTL_GITHUB_CLIENT_SECRET: undefined }, /set all of RELAYCTL_GITHUB_APP_ID/],
    [{ ...gh, RELAYCTL_GITHUB_CLIENT_ID: undefined }, /_CLIENT_ID and _CLIENT_SECRET, or none/],
    [
      { ...gh, RELAYCTL_GITHUB_CLIENT_ID: "not an id" },
      /RELAYCTL_GITHUB_CLIENT_ID: must be the App's client id/,
    ],
    [{ ...gh, RELAYCTL_GITHUB_APP_ID: "my-app" }, /RELAYCTL_GITHUB_APP_ID: must be the App's numeric id/],
    [
      { ...gh, RELAYCTL_GITHUB_PRIVATE_KEY_FILE: join(dir, "missing.pem") },
      /RELAYCTL_GITHUB_PRIVATE_KEY_FILE: cannot read/,
    ],
    [
      { ...gh, RELAYCTL_GITHUB_PRIVATE_KEY_FILE: notPem },
      /RELAYCTL_GITHUB_PRIVATE_KEY_FILE: not a PEM private key/,
    ],
    [
      { ...gh, RELAYCTL_GITHUB_WEBHOOK_SECRET: "short" },
      /RELAYCTL_GITHUB_WEBHOOK_SECRET: must be at least 16/,
    ],
  ];
  for (const [env, re] of cases) {
    const err = t.throws(() => loadConfig(env as Record<string, string>), { instanceOf: ConfigError });
    t.regex(err.message, re);
    t.false(err.message.includes("\n"));
  }
});

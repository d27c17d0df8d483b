// The CLI's installer and download routes through Fastify's inject(), on the SQLite store and the
// in-process bus: what is served, the URL written into cli/install.sh, and the refusals (no bundle
// built, a file name that is not the bundle's, a Host header a shell would read).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { type ExecutionContext } from "ava";
import type { FastifyInstance } from "fastify";
import { buildApi } from "../api/app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { loadConfig } from "../config.js";
import { migrate, openDb } from "../db/knex.js";
import { DeployService } from "../deployments/service.js";
import { createLogger } from "../lib/logger.js";
import { cliLatest } from "../http/answers.js";
import { OperationService } from "../operations/service.js";

const SHA = "cd".repeat(32);
const FILE = "relayctl-1.2.3.cjs";
const BODY = "#!/usr/bin/env node\nconsole.log('1.2.3')\n";

async function api(t: ExecutionContext, env: Record<string, string>): Promise<FastifyInstance> {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-cli-install-"));
  const url = `sqlite://${join(dir, "db.sqlite")}`;
  const db = openDb(url);
  t.teardown(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await migrate(db);
  const config = loadConfig({ RELAYCTL_DATABASE_URL: url, RELAYCTL_BUS: "memory", ...env });
  const bus = new MemoryBus();
  const log = createLogger("silent", {});
  useAuditKeys(resolveAuditKeys({ databaseUrl: url }));
  const ops = new OperationService(db, bus, log, config.leaseMs);
  const deploys = new DeployService(db, bus, ops, log, config.masterKey, config.leaseMs);
  const app = await buildApi({ config, db, bus, ops, deploys }, log, () => []);
  t.teardown(() => app.close());
  return app;
}

function bundleDir(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-cli-bundle-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const latest = { version: "1.2.3", file: FILE, sha256: SHA, size: BODY.length };
  writeFileSync(join(dir, "latest.json"), JSON.stringify(latest));
  writeFileSync(join(dir, FILE), BODY);
  writeFileSync(join(dir, `${FILE}.sha256`), `${SHA}  ${FILE}\n`);
  writeFileSync(join(dir, "secret.txt"), "not for download");
  return dir;
}

test("cli install - /cli/install.sh carries the control plane's own URL, from RELAYCTL_PUBLIC_URL or the Host header", async (t) => {
  const fromHost = await api(t, { RELAYCTL_CLI_BUNDLE_DIR: bundleDir(t) });
  const res = await fromHost.inject({ url: "/cli/install.sh", headers: { host: "relay.localhost:8080" } });
  t.is(res.statusCode, 200);
  t.regex(res.headers["content-type"] as string, /^text\/x-shellscript/);
  t.regex(res.body, /^#!\/bin\/sh\n/);
  t.regex(res.body, /^base_url='http:\/\/relay\.localhost:8080' {2}# @control-plane-url/m);
  // Any other Host is anyone's to write: without RELAYCTL_PUBLIC_URL no URL is made of it.
  const forged = await fromHost.inject({
    url: "/cli/install.sh",
    headers: { host: "relay.example.com:8080" },
  });
  t.is(forged.statusCode, 400);
  t.regex(forged.json().detail, /set RELAYCTL_PUBLIC_URL/);

  const configured = await api(t, {
    RELAYCTL_CLI_BUNDLE_DIR: bundleDir(t),
    RELAYCTL_PUBLIC_URL: "https://relay.example.com/",
  });
  const res2 = await configured.inject({ url: "/cli/install.sh", headers: { host: "evil.example" } });
  t.regex(res2.body, /^base_url='https:\/\/relay\.example\.com' {2}# @control-plane-url/m);
});

test("cli install - a Host header that is not a host name never reaches the script", async (t) => {
  const app = await api(t, { RELAYCTL_CLI_BUNDLE_DIR: bundleDir(t) });
  for (const host of ["a$(id)", "a'b", "a`id`", "a b", "a;b"]) {
    for (const url of ["/cli/install.sh", "/cli/latest"]) {
      const res = await app.inject({ url, headers: { host } });
      t.is(res.statusCode, 400, `${url} ${host}`);
      // The shell-safe check of install scripts, or the edge's for every route (http/edge.ts).
      t.regex(res.json().detail, /^Host header is not a host name/);
    }
  }
});

test("cli install - /cli/latest and the bundle's two files are served, nothing else from the folder", async (t) => {
  const app = await api(t, {
    RELAYCTL_CLI_BUNDLE_DIR: bundleDir(t),
    RELAYCTL_PUBLIC_URL: "https://relay.example.com",
  });
  const latest = await app.inject({ url: "/cli/latest" });
  t.is(latest.statusCode, 200);
  t.deepEqual(latest.json(), {
    version: "1.2.3",
    file: FILE,
    sha256: SHA,
    size: BODY.length,
    url: `https://relay.example.com/cli/1.2.3/${FILE}`,
  });
  // The answer is the one the OpenAPI document promises.
  t.true(cliLatest.safeParse(latest.json()).success);
  const file = await app.inject({ url: `/cli/1.2.3/${FILE}` });
  t.is(file.statusCode, 200);
  t.is(file.headers["content-type"], "application/javascript");
  t.is(file.body, BODY);
  const sum = await app.inject({ url: `/cli/1.2.3/${FILE}.sha256` });
  t.is(sum.statusCode, 200);
  t.is(sum.body, `${SHA}  ${FILE}\n`);

  for (const path of [
    "/cli/1.2.3/secret.txt",
    "/cli/1.2.3/..%2Fsecret.txt",
    "/cli/1.2.3/latest.json",
    "/cli/9.9.9/relayctl-9.9.9.cjs",
    "/cli/1.2.3/relayctl-1.2.3.cjs.bak",
    "/cli/1.2.3/relayctl-1.2.3.js",
    "/cli/..%2F..%2Fetc/passwd",
    "/cli/1.2.3/relayctl-1.2.3.cjs%00",
  ]) {
    const res = await app.inject({ url: path });
    t.is(res.statusCode, 404, path);
    t.regex(res.json().detail, /^CLI bundle file .* not found$/, path);
  }
});

test("cli install - without a built bundle /cli/latest answers 503 with how to build it", async (t) => {
  const empty = mkdtempSync(join(tmpdir(), "relayctl-nocli-"));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  const app = await api(t, { RELAYCTL_CLI_BUNDLE_DIR: empty });
  const res = await app.inject({ url: "/cli/latest" });
  t.is(res.statusCode, 503);
  t.deepEqual(res.json(), {
    detail: "no CLI bundle to serve: the control plane's CLI bundle is not built (make build, or make dev)",
  });
  t.is((await app.inject({ url: `/cli/1.2.3/${FILE}` })).statusCode, 404);
  // A latest.json that names another file than the bundle's own is refused, not followed.
  writeFileSync(
    join(empty, "latest.json"),
    JSON.stringify({ version: "1.2.3", file: "../x", sha256: SHA, size: 1 }),
  );
  t.is((await app.inject({ url: "/cli/latest" })).statusCode, 503);
  writeFileSync(join(empty, "latest.json"), "{not json");
  t.is((await app.inject({ url: "/cli/latest" })).statusCode, 503);
});

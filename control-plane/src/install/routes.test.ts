// The installer and bundle routes through Fastify's inject(), on the SQLite store and the
// in-process bus: what is served, the URL written into install.sh, and the refusals (no bundles
// built, a file name that is not a bundle's, a Host header a shell would read).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPublicKey, verify } from "node:crypto";
import test from "ava";
import type { FastifyInstance } from "fastify";
import { buildApi } from "../api/app.js";
import { resolveAuditKeys, useAuditKeys } from "../audit/chain-key.js";
import { MemoryBus } from "../bus/memory-bus.js";
import { loadConfig } from "../config.js";
import { migrate, openDb } from "../db/knex.js";
import { DeployService } from "../deployments/service.js";
import { createLogger } from "../lib/logger.js";
import { OperationService } from "../operations/service.js";
import { bundleStatement } from "./signing.js";

const SHA = "ab".repeat(32);
const FILE = "relayctl-agent-1.2.3-linux-x64.tar.gz";

async function api(t: import("ava").ExecutionContext, env: Record<string, string>): Promise<FastifyInstance> {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-install-"));
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

function bundleDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "relayctl-bundles-"));
  const latest = { version: "1.2.3", bundles: [{ arch: "x64", file: FILE, sha256: SHA }] };
  writeFileSync(join(dir, "latest.json"), JSON.stringify(latest));
  writeFileSync(join(dir, FILE), "tarball bytes");
  writeFileSync(join(dir, `${FILE}.sha256`), `${SHA}  ${FILE}\n`);
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "secret.txt"), "not for download");
  return dir;
}

test("install - /install.sh carries the control plane's own URL, from RELAYCTL_PUBLIC_URL or the Host header", async (t) => {
  const fromHost = await api(t, { RELAYCTL_AGENT_BUNDLE_DIR: bundleDir() });
  const res = await fromHost.inject({ url: "/install.sh", headers: { host: "relay.localhost:8080" } });
  t.is(res.statusCode, 200);
  t.regex(res.headers["content-type"] as string, /^text\/x-shellscript/);
  t.regex(res.body, /^#!\/bin\/sh\n/);
  t.regex(res.body, /^base_url='http:\/\/relay\.localhost:8080' {2}# @control-plane-url/m);
  // Any other Host is anyone's to write: without RELAYCTL_PUBLIC_URL no URL is made of it.
  const forged = await fromHost.inject({ url: "/install.sh", headers: { host: "relay.example.com:8080" } });
  t.is(forged.statusCode, 400);
  t.regex(forged.json().detail, /set RELAYCTL_PUBLIC_URL/);

  const configured = await api(t, {
    RELAYCTL_AGENT_BUNDLE_DIR: bundleDir(),
    RELAYCTL_PUBLIC_URL: "https://relay.example.com/",
  });
  const res2 = await configured.inject({ url: "/install.sh", headers: { host: "evil.example" } });
  t.regex(res2.body, /^base_url='https:\/\/relay\.example\.com' {2}# @control-plane-url/m);
});

test("install - a Host header that is not a host name never reaches the script", async (t) => {
  const app = await api(t, { RELAYCTL_AGENT_BUNDLE_DIR: bundleDir() });
  for (const host of ["a$(id)", "a'b", "a`id`", "a b", "a;b"]) {
    const res = await app.inject({ url: "/install.sh", headers: { host } });
    t.is(res.statusCode, 400, host);
    // The shell-safe check of install scripts, or the edge's for every route (http/edge.ts).
    t.regex(res.json().detail, /^Host header is not a host name/);
  }
});

test("install - /agent/latest and the bundle files are served, nothing else from the folder", async (t) => {
  const app = await api(t, {
    RELAYCTL_AGENT_BUNDLE_DIR: bundleDir(),
    RELAYCTL_PUBLIC_URL: "https://relay.example.com",
  });
  const latest = await app.inject({ url: "/agent/latest" });
  t.is(latest.statusCode, 200);
  const { signing_key, bundles } = latest.json();
  t.like(latest.json(), { version: "1.2.3" });
  t.like(bundles, [{ arch: "x64", url: `https://relay.example.com/agent/1.2.3/${FILE}`, sha256: SHA }]);
  // The signature is the control plane's Ed25519 one over the bundle's statement (finding 11).
  const publicKey = createPublicKey({ key: Buffer.from(signing_key, "base64"), format: "der", type: "spki" });
  t.is(publicKey.asymmetricKeyType, "ed25519");
  const statement = Buffer.from(bundleStatement(FILE, SHA));
  t.true(verify(null, statement, publicKey, Buffer.from(bundles[0].signature, "base64")));
  t.false(
    verify(
      null,
      Buffer.from(bundleStatement(FILE, "cd".repeat(32))),
      publicKey,
      Buffer.from(bundles[0].signature, "base64"),
    ),
  );
  const sig = await app.inject({ url: `/agent/1.2.3/${FILE}.sig` });
  t.is(sig.statusCode, 200);
  t.true(verify(null, statement, publicKey, Buffer.from(sig.body.trim(), "base64")));
  const script = await app.inject({ url: "/install.sh" });
  t.true(script.body.includes(`signing_key='${signing_key}'  # @agent-signing-key`));
  const file = await app.inject({ url: `/agent/1.2.3/${FILE}` });
  t.is(file.statusCode, 200);
  t.is(file.headers["content-type"], "application/gzip");
  t.is(file.body, "tarball bytes");
  const sum = await app.inject({ url: `/agent/1.2.3/${FILE}.sha256` });
  t.is(sum.body, `${SHA}  ${FILE}\n`);

  for (const path of [
    "/agent/1.2.3/secret.txt",
    "/agent/1.2.3/..%2Fsecret.txt",
    "/agent/1.2.3/latest.json",
    "/agent/9.9.9/relayctl-agent-9.9.9-linux-x64.tar.gz",
    "/agent/1.2.3/relayctl-agent-1.2.3-linux-x64.tar.gz.sha256.bak",
    "/agent/1.2.3/relayctl-agent-1.2.3-linux-x64.tar.gz.sha256.sig",
    "/agent/9.9.9/relayctl-agent-9.9.9-linux-x64.tar.gz.sig",
    "/agent/..%2F..%2Fetc/passwd",
    "/agent/1.2.3/relayctl-agent-1.2.3-linux-x64.tar.gz%00",
  ]) {
    const res = await app.inject({ url: path });
    t.is(res.statusCode, 404, path);
    t.regex(res.json().detail, /not found/, path);
  }
});

test("install - without built bundles /agent/latest answers 503 with how to build them", async (t) => {
  const empty = mkdtempSync(join(tmpdir(), "relayctl-nobundles-"));
  t.teardown(() => rmSync(empty, { recursive: true, force: true }));
  const app = await api(t, { RELAYCTL_AGENT_BUNDLE_DIR: empty });
  const res = await app.inject({ url: "/agent/latest" });
  t.is(res.statusCode, 503);
  t.deepEqual(res.json(), {
    detail: "no agent bundle to serve: the control plane's agent bundles are not built (make build)",
  });
  writeFileSync(join(empty, "latest.json"), "{not json");
  t.is((await app.inject({ url: "/agent/latest" })).statusCode, 503);
});

// The agent bundles as the installer receives them (set-up shared with install-agent.test.ts in
// harness/install-agent.ts): a bundle that does not match the control plane's checksum, or whose
// checksum was rewritten to match, fails before anything is installed or enrolled (only the
// signature, made with the control plane's key, cannot be made again), and each arch's bundle
// carries a node and a pty.node built for that arch.
import { createHash, generateKeyPairSync } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { type Server, createServer } from "node:http";
import { join } from "node:path";
import { listenOnFreePort, run } from "@relayctl/devkit";
import test from "ava";
import { makeTempDir, onCleanup } from "./harness/cleanup";
import { request } from "./harness/http";
import {
  VERSION,
  bundleDir,
  c,
  describe,
  installAgentStack,
  installer,
  joinToken,
  scratchRoot,
  seedFromBuild,
  sh,
  tree,
} from "./harness/install-agent";
import { REPO_ROOT } from "./harness/programs";

installAgentStack(test);

test.serial(
  "install - a bundle that does not match the control plane's checksum installs nothing",
  async (t) => {
    // A mirror that serves a tampered copy: one byte of the real tarball flipped.
    const file = `relayctl-agent-${VERSION}-linux-${process.arch}.tar.gz`;
    const tampered = readFileSync(join(bundleDir, file));
    const at = tampered.length - 100;
    tampered.writeUInt8(tampered.readUInt8(at) ^ 0xff, at);
    const mirror: Server = createServer((req, res) => {
      if (req.url === `/${file}`) res.end(tampered);
      else res.writeHead(404).end();
    });
    const port = await listenOnFreePort(mirror);
    onCleanup(() => new Promise<void>((resolve) => mirror.close(() => resolve())));

    const root = scratchRoot("tampered");
    const name = `tampered-${Math.random().toString(36).slice(2, 8)}`;
    const token = await joinToken(name);
    const out = await sh([
      "--token",
      token,
      "--prefix",
      root,
      "--no-systemd",
      "--mirror",
      `http://127.0.0.1:${port}`,
    ]);
    t.is(out.code, 1, describe(out));
    t.regex(out.stderr, /checksum mismatch for relayctl-agent-.*: expected sha256 [0-9a-f]{64}/);
    t.regex(out.stderr, /nothing was installed/);
    t.deepEqual(tree(root), []);
    // It never got as far as enrolling: the token is still unused.
    const rows = await c.db.query("SELECT used_at FROM join_tokens WHERE server_name = ?", [name]);
    t.deepEqual(
      rows.map((r) => r.used_at),
      [null],
    );
  },
);

test.serial(
  "install - a tarball and checksum both rewritten on the way fail the signature check; nothing is installed",
  async (t) => {
    // Issue 30, finding 11: a cache or proxy between the server and the control plane that
    // changes the bundle and every checksum it is offered with. Only the signature, made with
    // the control plane's key, cannot be made again.
    const file = `relayctl-agent-${VERSION}-linux-${process.arch}.tar.gz`;
    const real = readFileSync(join(bundleDir, file));
    const tampered = Buffer.from(real);
    const at = tampered.length - 100;
    tampered.writeUInt8(tampered.readUInt8(at) ^ 0xff, at);
    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    const latest = await request(c, "/agent/latest", { key: null });
    const key = String(latest.json.signing_key);
    t.regex(key, /^MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=$/);
    t.true(readFileSync(installer, "utf8").includes(`signing_key='${key}'  # @agent-signing-key`));
    const proxy: Server = createServer(async (req, res) => {
      const upstream = await fetch(`${c.baseUrl}${req.url}`);
      let body = Buffer.from(await upstream.arrayBuffer());
      if (req.url?.endsWith(`/${file}`)) body = tampered;
      else if (req.url === "/agent/latest" || req.url?.endsWith(".sha256"))
        body = Buffer.from(body.toString("utf8").replaceAll(sha(real), sha(tampered)));
      res.writeHead(upstream.status).end(body);
    });
    const via = `http://127.0.0.1:${await listenOnFreePort(proxy)}`;
    onCleanup(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

    const root = scratchRoot("resigned");
    const name = `resigned-${Math.random().toString(36).slice(2, 8)}`;
    const token = await joinToken(name);
    const out = await sh([
      "--token",
      token,
      "--url",
      via,
      "--signing-key",
      key,
      "--prefix",
      root,
      "--no-systemd",
    ]);
    t.is(out.code, 1, describe(out));
    t.notRegex(out.stderr, /checksum mismatch/, "the checksum was rewritten to match");
    t.regex(out.stderr, /signature mismatch for relayctl-agent-.*: it is not signed by the key given/);
    t.regex(out.stderr, /nothing was\s+installed/);
    t.deepEqual(tree(root), []);
    const rows = await c.db.query("SELECT used_at FROM join_tokens WHERE server_name = ?", [name]);
    t.deepEqual(
      rows.map((r) => r.used_at),
      [null],
    );

    // Another key than the control plane's (a script someone else served, a wrong paste): refused too.
    const other = generateKeyPairSync("ed25519")
      .publicKey.export({ format: "der", type: "spki" })
      .toString("base64");
    const wrong = await sh(["--token", token, "--signing-key", other, "--prefix", root, "--no-systemd"]);
    t.is(wrong.code, 1, describe(wrong));
    t.regex(wrong.stderr, /signature mismatch/);
    t.deepEqual(tree(root), []);
  },
);

/** The ELF machine of a file: 62 x86-64, 183 aarch64 (e_machine, little-endian, at byte 18). */
function elfMachine(file: string): number {
  const head = readFileSync(file).subarray(0, 20);
  if (head.toString("latin1", 1, 4) !== "ELF") throw new Error(`${file} is not an ELF file`);
  return head.readUInt16LE(18);
}

test("install - each arch's bundle carries a node and a pty.node built for that arch", async (t) => {
  // Only this machine's arch runs here: the other one is checked by what its binaries are.
  const other = process.arch === "x64" ? "arm64" : "x64";
  const out = makeTempDir("bundles-other-arch");
  seedFromBuild(out, other);
  await run(process.execPath, [
    join(REPO_ROOT, "scripts", "agent-bundle.mjs"),
    ...["--out", out, "--version", VERSION, "--arch", other],
  ]);
  const name = `relayctl-agent-${VERSION}`;
  const file = join(out, `${name}-linux-${other}.tar.gz`);
  const sum = readFileSync(`${file}.sha256`, "utf8").split(" ")[0];
  const latest = JSON.parse(readFileSync(join(out, "latest.json"), "utf8"));
  t.deepEqual(latest.bundles, [{ arch: other, file: `${name}-linux-${other}.tar.gz`, sha256: sum }]);
  const unpacked = makeTempDir("bundle-other-arch");
  await run("tar", ["-xzf", file, "-C", unpacked]);
  const root = join(unpacked, name);
  const machine = other === "arm64" ? 183 : 62;
  t.is(elfMachine(join(root, "node", "bin", "node")), machine);
  t.is(elfMachine(join(root, "node_modules", "@lydell", `node-pty-linux-${other}`, "pty.node")), machine);
  t.is(statSync(join(root, "bin", "relayctl-agent")).mode & 0o111, 0o111, "the launcher is executable");
  t.deepEqual(JSON.parse(readFileSync(join(root, "package.json"), "utf8")).relayctl, {
    platform: "linux",
    arch: other,
    node: "24.21.0",
    node_pty: "1.1.0",
  });
});

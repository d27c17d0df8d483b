// The one-line agent install, end to end: the control plane serves /install.sh and the agent
// bundles (built here by scripts/agent-bundle.mjs into this file's own folder), the installer
// runs with `sh` into a scratch root (--prefix, --no-systemd: it runs as root here, but must not
// touch the real system), the unit passes `systemd-analyze verify`, and the installed agent,
// started the way the unit starts it, connects and runs a command through the API. The bundle
// carries its own Node.js: the installer runs on a PATH of the tools it names and nothing else,
// and the agent on a PATH of this machine's programs less every node.
import { spawn } from "node:child_process";
import { createHash, generateKeyPairSync } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  rmSync,
  realpathSync,
  symlinkSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { type Server, createServer } from "node:http";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, request } from "./harness/http";
import { ManagedProcess, cleanEnv } from "./harness/process";
import { REPO_ROOT } from "./harness/programs";

const VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "agent", "package.json"), "utf8")).version as string;
const UPGRADE = `${VERSION}-upgrade.1`;

let c: Cluster;
let dir: string;
let bundleDir: string;
let installer: string;
let apiKey: string;

/**
 * Starts out from `make build`'s tarball of arch (agent/dist/bundles) and the stamp of its inputs,
 * when both are there: the script then packs it again only if its inputs (the bundled agent, the
 * script, the runtime, the version) differ from that build's, which is how it skips an unchanged
 * arch itself. A pack is ~10 s of CPU here, and `make test` builds right before. The tarball is
 * read between two reads of its stamp, which the script removes before it packs and writes after:
 * a build running meanwhile leaves out empty, to be packed here.
 */
function seedFromBuild(out: string, arch: string): void {
  const built = join(REPO_ROOT, "agent", "dist", "bundles");
  const file = `relayctl-agent-${VERSION}-linux-${arch}.tar.gz`;
  const stamp = `.${file}.inputs`;
  const readStamp = () => (existsSync(join(built, stamp)) ? readFileSync(join(built, stamp), "utf8") : "");
  const before = readStamp();
  if (before === "" || !existsSync(join(built, file))) return;
  mkdirSync(out, { recursive: true });
  copyFileSync(join(built, file), join(out, file));
  if (readStamp() === before) writeFileSync(join(out, stamp), before);
  else rmSync(join(out, file), { force: true });
}

function buildBundles(version: string): Promise<unknown> {
  // This machine's arch only: the other's is the same tree with its own node and pty.node, which
  // cannot run here.
  return run(process.execPath, [
    join(REPO_ROOT, "scripts", "agent-bundle.mjs"),
    ...["--out", bundleDir, "--version", version, "--arch", process.arch],
  ]);
}

test.before(async () => {
  dir = makeTempDir("install");
  installerPath = pathOf(INSTALLER_TOOLS);
  serverPath = pathOf("all", NODE_PROGRAMS);
  bundleDir = join(dir, "bundles");
  seedFromBuild(bundleDir, process.arch);
  await buildBundles(VERSION);
  c = await startCluster({ serverEnv: { RELAYCTL_AGENT_BUNDLE_DIR: bundleDir } });
  const key = await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "install-test"]);
  apiKey = String(key.key);
  // The installer as a server owner gets it: over HTTP from the control plane.
  const res = await request(c, "/install.sh", { key: null });
  if (res.status !== 200) throw new Error(`GET /install.sh: ${res.status} ${res.text}`);
  installer = join(dir, "install.sh");
  writeFileSync(installer, res.text);
});
test.after.always(cleanupAll);

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function sh(args: string[], env: NodeJS.ProcessEnv = noNode(installerPath)): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn("/bin/sh", [installer, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The programs install.sh says it runs (its header), and no others: none of them is node. */
const INSTALLER_TOOLS = [
  "sh",
  "curl",
  "tar",
  "gzip",
  "sha256sum",
  "openssl",
  "uname",
  "id",
  "mktemp",
  "sed",
  "grep",
  "tr",
  "cut",
  "tail",
  "readlink",
  "mkdir",
  "mv",
  "rm",
  "rmdir",
  "ln",
  "chmod",
  "cat",
  "dirname",
  "basename",
];

/** A folder of symlinks to `names` as found on this machine's PATH (or every program there). */
function pathOf(names: string[] | "all", except: RegExp = /$^/): string {
  const bin = makeTempDir("path");
  const dirs = (process.env.PATH ?? "").split(":").filter((d) => d && existsSync(d));
  const wanted = names === "all" ? dirs.flatMap((d) => readdirSync(d)) : names;
  for (const tool of new Set(wanted)) {
    if (except.test(tool)) continue;
    const found = dirs.map((d) => join(d, tool)).find((f) => existsSync(f) && statSync(f).isFile());
    if (!found) {
      if (names === "all") continue;
      throw new Error(`${tool} is not on PATH`);
    }
    symlinkSync(realpathSync(found), join(bin, tool));
  }
  return bin;
}

// No node, nodejs, npm, npx or corepack anywhere on the PATH the installer and the agent get.
const NODE_PROGRAMS = /^(node|nodejs|npm|npx|corepack)$/;
let installerPath = "";
let serverPath = "";
const noNode = (path: string) => cleanEnv({ PATH: path });

/**
 * A `systemctl` that records its arguments: what install.sh asks of systemd without --no-systemd
 * (this machine runs no systemd; the unit itself is checked with systemd-analyze).
 */
function fakeSystemctl(): { env: NodeJS.ProcessEnv; calls: () => string[] } {
  const bin = makeTempDir("systemctl");
  const log = join(bin, "calls.log");
  writeFileSync(join(bin, "systemctl"), `#!/bin/sh\necho "$*" >>'${log}'\n`, { mode: 0o755 });
  return {
    env: noNode(`${bin}:${installerPath}`),
    calls: () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []),
  };
}

const describe = (o: Outcome) => `exit ${o.code}\n--- stdout\n${o.stdout}\n--- stderr\n${o.stderr}`;

async function joinToken(name = `srv-${Math.random().toString(36).slice(2, 8)}`): Promise<string> {
  const out = await c.admin(["create-join-token", "--tenant", c.tenantId, "--server-name", name]);
  return String(out.join_token);
}

function scratchRoot(name: string): string {
  const root = join(dir, name);
  mkdirSync(root);
  return root;
}

/** Every path under root, relative ("" when it is empty). */
function tree(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true }).map(String).sort();
}

/** What the installer owns under root: the tree less what the running agent writes in its state dir. */
function installed(root: string): string[] {
  const state = join("var", "lib", "relayctl-agent");
  return tree(root).filter((f) => !f.startsWith(`${state}/`) || f === join(state, "agent.json"));
}

const paths = (root: string) => ({
  opt: join(root, "opt", "relayctl-agent"),
  state: join(root, "var", "lib", "relayctl-agent"),
  unit: join(root, "etc", "systemd", "system", "relayctl-agent.service"),
});

/** The unit's ExecStart and environment, to start the agent as systemd would. */
function readUnit(unit: string): { argv: string[]; env: Record<string, string> } {
  const text = readFileSync(unit, "utf8");
  const value = (key: string) => [...text.matchAll(new RegExp(`^${key}=(.*)$`, "gm"))].map((m) => m[1]!);
  const env: Record<string, string> = {};
  for (const e of value("Environment")) env[e.slice(0, e.indexOf("="))] = e.slice(e.indexOf("=") + 1);
  for (const file of value("EnvironmentFile")) {
    const path = file.replace(/^-/, "");
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, "utf8").split("\n")) {
      const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
      if (m) env[m[1]!] = m[2]!;
    }
  }
  const [execStart] = value("ExecStart");
  return { argv: execStart!.split(" "), env };
}

let agentRuns = 0;
async function startInstalledAgent(root: string): Promise<ManagedProcess> {
  const { argv, env } = readUnit(paths(root).unit);
  const proc = new ManagedProcess({
    name: `installed-agent#${++agentRuns}`,
    command: argv[0]!,
    args: argv.slice(1),
    // A server without Node.js: the unit's ExecStart must bring its own.
    env: { ...noNode(serverPath), ...env },
    logFile: join(dir, `installed-agent-${agentRuns}.log`),
  });
  await proc.waitForMsg("connected", { timeoutMs: 30_000 });
  return proc;
}

function enrolled(root: string): { server_id: string; agent_credential: string } {
  return JSON.parse(readFileSync(join(paths(root).state, "agent.json"), "utf8"));
}

async function agentVersion(serverId: string): Promise<unknown> {
  const res = await request(c, "/api/servers", { key: null, headers: { "X-API-Key": apiKey } });
  const servers = res.json.servers as { id: string; agent_version: string }[];
  return servers.find((s) => s.id === serverId)?.agent_version;
}

// One server's life, in order: install, run a command, run the installer again, upgrade and
// re-enroll, uninstall.
const main = { root: "", token: "", agent: undefined as ManagedProcess | undefined };

test.serial(
  "install - the served script installs, enrolls, and the agent it installed runs a command",
  async (t) => {
    t.regex(readFileSync(installer, "utf8"), new RegExp(`^base_url='${c.baseUrl}'`, "m"));
    main.root = scratchRoot("root");
    main.token = await joinToken();
    const out = await sh(["--token", main.token, "--prefix", main.root, "--no-systemd"]);
    t.is(out.code, 0, describe(out));
    t.notRegex(out.stdout + out.stderr, /rjt_/, "the join token is never printed");

    const p = paths(main.root);
    t.is(readlinkSync(join(p.opt, "current")), VERSION);
    const installedDir = join(p.opt, VERSION);
    t.true(
      existsSync(join(installedDir, "node_modules", "@lydell", `node-pty-linux-${process.arch}`, "pty.node")),
    );
    t.regex(
      readFileSync(p.unit, "utf8"),
      new RegExp(`^ExecStart=${p.opt}/current/bin/relayctl-agent run$`, "m"),
    );
    t.is(statSync(join(p.state, "agent.json")).mode & 0o777, 0o600);
    t.is(statSync(p.state).mode & 0o777, 0o700);

    const unit = readFileSync(p.unit, "utf8");
    for (const line of [
      "User=relayctl-agent",
      "NoNewPrivileges=yes",
      "ProtectSystem=full",
      "ProtectHome=yes",
      "PrivateTmp=yes",
    ]) {
      t.regex(unit, new RegExp(`^${line}$`, "m"));
    }
    // systemd's own check: unknown keys, bad values and a missing ExecStart binary all show here.
    const verify = await run("systemd-analyze", ["verify", p.unit]).catch((err: Outcome & Error) => err);
    t.is((verify as Outcome).stderr.trim(), "", "systemd-analyze verify finds nothing to say");

    main.agent = await startInstalledAgent(main.root);
    // The agent is the bundle's Node.js (the launcher execs it), not any node of this machine.
    t.is(realpathSync(`/proc/${main.agent.pid}/exe`), join(installedDir, "node", "bin", "node"));
    const { server_id } = enrolled(main.root);
    const res = await exec(c, {
      server_id,
      command: "command -v node || echo installed-without-node-$((6*7))",
      timeout_seconds: 30,
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "installed-without-node-42\n", stderr: "" });
    t.is(await agentVersion(server_id), VERSION);
  },
);

test.serial(
  "install - running it again keeps the install, the credential and the running agent",
  async (t) => {
    const before = enrolled(main.root);
    const files = installed(main.root);
    const systemctl = fakeSystemctl();
    const out = await sh(["--prefix", main.root], systemctl.env);
    t.is(out.code, 0, describe(out));
    // Nothing changed: the unit is started if stopped, never restarted (that would cut commands).
    t.deepEqual(systemctl.calls(), [
      "daemon-reload",
      "enable relayctl-agent.service",
      "start relayctl-agent.service",
    ]);
    t.regex(out.stdout, /already unpacked/);
    t.regex(out.stdout, /already enrolled/);
    t.deepEqual(enrolled(main.root), before);
    t.deepEqual(installed(main.root), files);
    const res = await exec(c, {
      server_id: before.server_id,
      command: "echo still-here",
      timeout_seconds: 30,
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "still-here\n", stderr: "" });
  },
);

test.serial(
  "install - a used join token stops clearly and leaves an existing install as it was",
  async (t) => {
    const before = enrolled(main.root);
    const files = installed(main.root);
    // The token of the first install, used by it.
    const out = await sh(["--token", main.token, "--prefix", main.root, "--no-systemd"]);
    t.is(out.code, 1, describe(out));
    t.regex(out.stderr, /enrollment refused \(HTTP 401\): join token is invalid, already used or expired/);
    t.regex(out.stderr, /nothing was installed/);
    t.deepEqual(enrolled(main.root), before);
    t.deepEqual(installed(main.root), files);
  },
);

test.serial("install - an expired join token stops clearly and leaves nothing behind", async (t) => {
  const name = `expired-${Math.random().toString(36).slice(2, 8)}`;
  const token = await joinToken(name);
  // Tokens live at least a minute; age this one instead of waiting.
  await c.db.query("UPDATE join_tokens SET expires_at = ? WHERE server_name = ?", [Date.now() - 1000, name]);
  const root = scratchRoot("expired");
  const out = await sh(["--token", token, "--prefix", root, "--no-systemd"]);
  t.is(out.code, 1, describe(out));
  t.regex(out.stderr, /join token is invalid, already used or expired/);
  t.regex(out.stderr, /rolled back/);
  t.deepEqual(tree(root), [], "the scratch root is as empty as before");
});

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
    await new Promise<void>((resolve) => mirror.listen(0, "127.0.0.1", resolve));
    onCleanup(() => new Promise<void>((resolve) => mirror.close(() => resolve())));
    const port = (mirror.address() as { port: number }).port;

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
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    onCleanup(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
    const via = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;

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

test.serial(
  "install - an upgrade with a new join token switches `current`, re-enrolls, keeps the last version",
  async (t) => {
    await buildBundles(UPGRADE);
    const before = enrolled(main.root);
    const systemctl = fakeSystemctl();
    const out = await sh(["--token", await joinToken(), "--prefix", main.root], systemctl.env);
    t.is(out.code, 0, describe(out));
    t.true(systemctl.calls().includes("restart relayctl-agent.service"), systemctl.calls().join("; "));
    const p = paths(main.root);
    t.is(readlinkSync(join(p.opt, "current")), UPGRADE);
    t.true(lstatSync(join(p.opt, VERSION)).isDirectory(), "the version before stays, to go back by hand");
    t.not(enrolled(main.root).agent_credential, before.agent_credential, "a new credential");

    await main.agent!.stop("SIGTERM");
    main.agent = await startInstalledAgent(main.root);
    const { server_id } = enrolled(main.root);
    t.is(await agentVersion(server_id), UPGRADE);
    const res = await exec(c, { server_id, command: "echo upgraded", timeout_seconds: 30 });
    assertCompleted(t, res, { exit_code: 0, stdout: "upgraded\n", stderr: "" });
  },
);

test.serial("install - --uninstall leaves nothing in the scratch root", async (t) => {
  await main.agent!.stop("SIGTERM");
  const systemctl = fakeSystemctl();
  const out = await sh(["--uninstall", "--prefix", main.root], systemctl.env);
  t.is(out.code, 0, describe(out));
  t.deepEqual(systemctl.calls(), ["disable --now relayctl-agent.service", "daemon-reload"]);
  t.regex(out.stdout, /revoke-agent/);
  t.deepEqual(tree(main.root), []);
});

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

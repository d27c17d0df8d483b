#!/usr/bin/env node
// Run after `npm ci`: keeps this machine's build of better-sqlite3 in prebuild-install's own
// cache (<npm cache>/_prebuilds), where the package's install script looks before it tries to
// download a prebuilt binary from GitHub. These machines cannot reach GitHub, so every fresh
// clone compiled SQLite from source: 50 s of CPU, and 290 s measured on a busy 2-core machine,
// by far the largest part of a first `make dev`. With the cache, the next `npm ci` of any clone
// on this machine unpacks the binary in a second. The cache entry is named exactly as
// prebuild-install names a downloaded one (its own util.js: package version, Node ABI,
// platform, libc, arch), so another Node ABI or version never picks it up.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(REPO, "package.json"));
const ADDON = "build/Release/better_sqlite3.node";

function cachePath(pkg) {
  const util = require("prebuild-install/util");
  const detectLibc = require("detect-libc");
  const libc = (detectLibc.isNonGlibcLinuxSync() && detectLibc.familySync()) || "";
  const url = util.getDownloadUrl({
    pkg,
    runtime: "node",
    abi: process.versions.modules,
    platform: process.platform,
    arch: process.arch,
    libc,
    "tag-prefix": "v",
  });
  return util.cachedPrebuild(url);
}

try {
  const pkgDir = dirname(require.resolve("better-sqlite3/package.json"));
  const cached = cachePath(require("better-sqlite3/package.json"));
  if (!existsSync(cached) && existsSync(join(pkgDir, ADDON))) {
    mkdirSync(dirname(cached), { recursive: true });
    const tmp = `${cached}.${process.pid}.tmp`;
    execFileSync("tar", ["-czf", tmp, "-C", pkgDir, ADDON]);
    renameSync(tmp, cached); // whole or not at all: a concurrent npm ci never reads half a file
    console.log(`[native-cache] kept the better-sqlite3 build for the next clone: ${cached}`);
  }
} catch (err) {
  // Only a speed-up: never fail an install over it.
  console.log(`[native-cache] skipped: ${err instanceof Error ? err.message : String(err)}`);
}

#!/usr/bin/env node
// Builds the single-file CLI the control plane serves to other machines (GET /cli/...):
//   <out>/relayctl-<version>.cjs          the CLI and every dependency in one CommonJS file
//                                         (esbuild, minified: 0.8 MB instead of 1.6 MB), run by
//                                         any Node >= 24: `node relayctl-<version>.cjs ...`
//   <out>/relayctl-<version>.cjs.sha256   its checksum, in sha256sum's format
//   <out>/latest.json                     {version, file, sha256, size}
// The CLI has no native part, so one file serves every OS and arch. It is bundled from the
// TypeScript sources (cli/src/main.ts), so `make dev` builds it without tsc; `make build` runs
// this script too. esbuild output is deterministic: the same sources give the same checksum.
//
//   node scripts/cli-bundle.mjs [--out DIR]      (default cli/dist/bundles)
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
// esbuild is the deploy-sync action's pinned one (action/package.json), hoisted by npm.
import { build } from "esbuild";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CLI = join(REPO, "cli");
export const DEFAULT_OUT = join(CLI, "dist", "bundles");

/** Newest mtime of what goes into the bundle: the CLI's sources and its package.json. */
function newestInput() {
  const files = readdirSync(join(CLI, "src"), { recursive: true })
    .filter((f) => /\.ts$/.test(f) && !/\.test\.ts$/.test(f))
    .map((f) => join(CLI, "src", f));
  return Math.max(...[...files, join(CLI, "package.json")].map((f) => statSync(f).mtimeMs));
}

/** latest.json of out when its bundle is there and newer than every input, else undefined. */
function current(out) {
  try {
    const latest = JSON.parse(readFileSync(join(out, "latest.json"), "utf8"));
    return statSync(join(out, latest.file)).mtimeMs > newestInput() ? latest : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Builds the bundle into `out` and returns latest.json's content. With `skipWhenCurrent`
 * (make dev), a bundle newer than every source is kept as it is.
 */
export async function buildCliBundle({ out = DEFAULT_OUT, skipWhenCurrent = false } = {}) {
  if (skipWhenCurrent) {
    const kept = current(out);
    if (kept) return { ...kept, built: false };
  }
  const { version } = JSON.parse(readFileSync(join(CLI, "package.json"), "utf8"));
  // The control plane serves only names of this shape (control-plane/src/install/cli-bundle.ts).
  if (!/^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/.test(version))
    throw new Error(`cli/package.json version '${version}': letters, digits, . + - only`);
  const file = `relayctl-${version}.cjs`;
  mkdirSync(out, { recursive: true });
  // Written beside and renamed: a control plane serving this folder never sends half a file.
  const tmp = join(out, `.${file}.tmp`);
  await build({
    entryPoints: [join(CLI, "src", "main.ts")],
    outfile: tmp,
    bundle: true,
    platform: "node",
    target: "node24",
    format: "cjs",
    minify: true,
    legalComments: "none",
    logLevel: "warning",
  });
  const bytes = readFileSync(tmp);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  renameSync(tmp, join(out, file));
  writeFileSync(join(out, `${file}.sha256`), `${sha256}  ${file}\n`);
  const latest = { version, file, sha256, size: bytes.length };
  writeFileSync(join(out, "latest.json"), `${JSON.stringify(latest, null, 2)}\n`);
  return { ...latest, built: true };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: "string", default: DEFAULT_OUT } } });
  const out = resolve(values.out);
  const b = await buildCliBundle({ out });
  process.stdout.write(`${join(out, b.file)}  sha256 ${b.sha256}  ${b.size} bytes\n`);
  // `make build` runs this after tsc, which writes cli/dist/main.js without the executable bit
  // that npm sets on a package's "bin" only when it exists at `npm ci`: without it, `npm exec
  // relayctl` in the checkout is "Permission denied" (scripts/dev-build.mjs does the same).
  const main = join(CLI, "dist", "main.js");
  if (existsSync(main)) chmodSync(main, 0o755);
}

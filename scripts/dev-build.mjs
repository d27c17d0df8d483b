#!/usr/bin/env node
// make dev's build: the workspaces `make dev` runs (proto, reverse-proxy-sync, tracing, devkit,
// control-plane, agent, and cli for bin/relayctl) transpiled to dist/ with esbuild, file by file
// as tsc would lay them out (CommonJS, ES2022, source maps), without type checking. On a fresh
// clone this takes about a second where `tsc -b` took over a minute on these machines; `make
// build`, `make test` and CI still type-check everything with tsc -b, which rewrites dist/ as its
// own: a workspace transpiled here loses its tsconfig.tsbuildinfo so tsc -b never takes esbuild's
// output for its own. A workspace is skipped when every dist file is newer than every source file.
import { chmodSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
// esbuild is the deploy-sync action's pinned one (action/package.json), hoisted by npm.
import { build } from "esbuild";
import { buildCliBundle } from "./cli-bundle.mjs";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WORKSPACES = [
  { dir: "proto", base: ".", roots: ["index.ts", "gen"] },
  { dir: "reverse-proxy-sync", base: "src", roots: ["src"] },
  { dir: "tracing", base: "src", roots: ["src"] },
  { dir: "devkit", base: "src", roots: ["src"] },
  { dir: "control-plane", base: "src", roots: ["src"] },
  { dir: "agent", base: "src", roots: ["src"] },
  // The CLI's @modelcontextprotocol/* packages are "type": "module" but export CommonJS builds
  // under "require", which this CommonJS gets (checked here: `bin/relayctl mcp` relays a session).
  { dir: "cli", base: "src", roots: ["src"], executable: "dist/main.js" },
];

/** The .ts sources under root (a file or a folder), tests and declarations left out. */
function sources(root) {
  if (statSync(root).isFile()) return [root];
  return readdirSync(root, { recursive: true })
    .map((f) => join(root, f))
    .filter((f) => /\.ts$/.test(f) && !/\.(test|d)\.ts$/.test(f));
}

const newest = (files) => Math.max(0, ...files.map((f) => statSync(f).mtimeMs));

function oldestOutput(dir) {
  try {
    const files = readdirSync(dir, { recursive: true }).map((f) => join(dir, f));
    const js = files.filter((f) => f.endsWith(".js"));
    return js.length ? Math.min(...js.map((f) => statSync(f).mtimeMs)) : 0;
  } catch {
    return 0;
  }
}

const started = Date.now();
let built = 0;
for (const ws of WORKSPACES) {
  const dir = join(REPO, ws.dir);
  const entryPoints = ws.roots.flatMap((r) => sources(join(dir, r)));
  const outdir = join(dir, "dist");
  if (oldestOutput(outdir) > newest(entryPoints)) continue;
  // tsc -b trusts its build info: without it, the next tsc -b rebuilds what esbuild wrote.
  for (const info of ["tsconfig.tsbuildinfo", "dist/tsconfig.tsbuildinfo"])
    rmSync(join(dir, info), { force: true });
  await build({
    entryPoints,
    outdir,
    outbase: join(dir, ws.base),
    format: "cjs",
    platform: "node",
    target: "node24",
    sourcemap: true,
    logLevel: "warning",
  });
  // npm links the cli package's "bin" (npm exec relayctl) at `npm ci`, before dist/ exists, so
  // the mode it would have set is set here.
  if (ws.executable) chmodSync(join(dir, ws.executable), 0o755);
  built += entryPoints.length;
}
// The single-file CLI the dev control plane serves at /cli/ (GET /cli/install.sh installs it).
const bundle = await buildCliBundle({ skipWhenCurrent: true });
console.log(
  `[dev] transpiled ${built} files${bundle.built ? ` and bundled ${bundle.file}` : ""} in ${Date.now() - started} ms (type checks: make build)`,
);

// Bundles the dashboard into dist/: one hashed script and one hashed stylesheet under
// dist/assets/ (cached for a year by the control plane) and dist/index.html naming them
// (never cached), so a new build is picked up at the next page load. No inline script or
// style anywhere: the control plane's CSP allows only 'self'. The favicon is a hashed asset
// too; dist/manifest.json tells the control plane the page paths (any other /app/ path is
// 404) and the favicon's name (for /favicon.ico).
import { createHash } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import { PAGE_PATHS } from "./src/paths.ts";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");

await rm(dist, { recursive: true, force: true });
const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: "src/main.tsx" },
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  outdir: join(dist, "assets"),
  entryNames: "[name]-[hash]",
  assetNames: "[name]-[hash]",
  jsx: "automatic",
  jsxImportSource: "preact",
  sourcemap: "linked",
  legalComments: "none",
  metafile: true,
  logLevel: "warning",
});

const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const script = outputs.find((f) => f.endsWith(".js"));
const style = outputs.find((f) => f.endsWith(".css"));
if (!script || !style) throw new Error(`esbuild produced no script or stylesheet: ${outputs.join(", ")}`);

const icon = await readFile(join(here, "src/favicon.svg"));
const favicon = `favicon-${createHash("sha256").update(icon).digest("hex").slice(0, 8)}.svg`;
await writeFile(join(dist, "assets", favicon), icon);
await writeFile(join(dist, "manifest.json"), `${JSON.stringify({ pages: PAGE_PATHS, favicon }, null, 2)}\n`);

await mkdir(dist, { recursive: true });
await writeFile(
  join(dist, "index.html"),
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>relayctl</title>
<link rel="icon" type="image/svg+xml" href="/app/assets/${favicon}">
<link rel="stylesheet" href="/app/assets/${style}">
<script type="module" src="/app/assets/${script}"></script>
</head>
<body>
<div id="root"><p class="boot">Loading relayctl…</p></div>
<noscript><p>The relayctl dashboard needs JavaScript. The API works without it.</p></noscript>
</body>
</html>
`,
);
console.log(`web: dist/index.html, manifest.json, assets/${script}, assets/${style}, assets/${favicon}`);

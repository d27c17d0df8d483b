// The dashboard's static serving through inject(): where / leads a signed-out
// person, the headers of pages and hashed assets, which paths are pages, the favicon,
// and the clear 503 of a control plane whose dashboard was never built. (Signed-in
// pages, and their 404, are covered in a real browser by test/dashboard-browser.test.ts.)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import Fastify from "fastify";
import type { ApiContext } from "../http/context.js";
import { installErrorHandling } from "../http/errors.js";
import { registerRoutes } from "../api/register-routes.js";
import { dashboardAssets, dashboardRoutes, isPage } from "./static.js";

// Without a session cookie nothing reads the database.
const ctx = { db: undefined } as unknown as ApiContext;

async function appWith(dist: string) {
  const app = Fastify();
  installErrorHandling(app);
  await registerRoutes(app, dashboardRoutes(ctx, dist), { db: ctx.db });
  await app.register(dashboardAssets(dist));
  return app;
}

const dir = mkdtempSync(join(tmpdir(), "relayctl-web-dist-"));
test.after.always(() => rmSync(dir, { recursive: true, force: true }));

const PAGES = ["/app/servers", "/app/applications/:id", "/app/applications/:id/deployments/:deploymentId"];

/** A dist/ as web/build.mjs writes it: index.html, manifest.json and assets/. */
function fakeBuild(name: string): string {
  const dist = join(dir, name);
  mkdirSync(join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "index.html"), "<!doctype html><title>relayctl</title>");
  writeFileSync(
    join(dist, "manifest.json"),
    JSON.stringify({ pages: PAGES, favicon: "favicon-1234abcd.svg" }),
  );
  writeFileSync(join(dist, "assets", "favicon-1234abcd.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
  return dist;
}

test("dashboard static - signed out, / and every page lead to sign-in and back", async (t) => {
  const app = await appWith(fakeBuild("built"));
  const root = await app.inject({ url: "/" });
  t.is(root.statusCode, 303);
  t.is(root.headers.location, "/login?next=/app/");
  const page = await app.inject({ url: "/app/activity?run_id=r-1" });
  t.is(page.statusCode, 303);
  t.is(page.headers.location, `/login?next=${encodeURIComponent("/app/activity?run_id=r-1")}`);
  t.is((await app.inject({ url: "/app" })).headers.location, "/app/");
});

test("dashboard static - hashed assets are immutable for a year, under the CSP; unknown ones are 404", async (t) => {
  const dist = fakeBuild("assets-only");
  writeFileSync(join(dist, "assets", "app-ABC123.js"), "console.log(1)");
  const app = await appWith(dist);
  const asset = await app.inject({ url: "/app/assets/app-ABC123.js" });
  t.is(asset.statusCode, 200);
  t.regex(String(asset.headers["cache-control"]), /max-age=31536000.*immutable/);
  t.regex(String(asset.headers["content-security-policy"]), /script-src 'self'/);
  t.is(asset.headers["x-content-type-options"], "nosniff");
  const missing = await app.inject({ url: "/app/assets/app-NOPE.js" });
  t.is(missing.statusCode, 404);
});

test("dashboard static - without a build, /app/ is 503 with a detail that says how to build it", async (t) => {
  const app = await appWith(join(dir, "never-built"));
  const res = await app.inject({ url: "/app/" });
  t.is(res.statusCode, 503);
  t.regex(res.json().detail, /make build/);
});

test("dashboard static - the pages of the manifest are pages; any other /app/ path is not", (t) => {
  for (const url of [
    "/app",
    "/app/",
    "/app/servers",
    "/app/servers/",
    "/app/servers?x=1",
    "/app/applications/a-1",
    "/app/applications/a-1/deployments/d-2",
  ])
    t.true(isPage(PAGES, url), url);
  for (const url of [
    "/app/nope",
    "/app/servers/extra",
    "/app/applications//deployments/d-2",
    "/app/applications/a-1/deployments",
    "/app/serversx",
  ])
    t.false(isPage(PAGES, url), url);
});

test("dashboard static - the favicon is a hashed asset cached for a year; /favicon.ico leads to it", async (t) => {
  const app = await appWith(fakeBuild("favicon"));
  const ico = await app.inject({ url: "/favicon.ico" });
  t.is(ico.statusCode, 302);
  t.is(ico.headers.location, "/app/assets/favicon-1234abcd.svg");
  t.is(ico.headers["cache-control"], "no-cache", "the next build's icon has another name");
  const svg = await app.inject({ url: "/app/assets/favicon-1234abcd.svg" });
  t.is(svg.statusCode, 200);
  t.regex(String(svg.headers["content-type"]), /^image\/svg\+xml/);
  t.regex(String(svg.headers["cache-control"]), /max-age=31536000.*immutable/);
});

test("dashboard static - a build without its manifest (an older web/dist) is not built: 503 with the detail", async (t) => {
  const dist = join(dir, "no-manifest");
  mkdirSync(join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "index.html"), "<!doctype html>");
  const app = await appWith(dist);
  const res = await app.inject({ url: "/app/" });
  t.is(res.statusCode, 503);
  t.regex(res.json().detail, /make build/);
});

// The dashboard's static serving through inject(): where / leads a signed-out
// person, the headers of pages and hashed assets, and the clear 503 of a control
// plane whose dashboard was never built. (Signed-in pages are covered in a real
// browser by test/dashboard-browser.test.ts.)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import Fastify from "fastify";
import type { ApiContext } from "../http/context.js";
import { installErrorHandling } from "../http/errors.js";
import { registerRoutes } from "../api/register-routes.js";
import { dashboardAssets, dashboardRoutes } from "./static.js";

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

test("dashboard static - signed out, / and every page lead to sign-in and back", async (t) => {
  const dist = join(dir, "built");
  mkdirSync(join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "index.html"), "<!doctype html><title>relayctl</title>");
  const app = await appWith(dist);
  const root = await app.inject({ url: "/" });
  t.is(root.statusCode, 303);
  t.is(root.headers.location, "/login?next=/app/");
  const page = await app.inject({ url: "/app/activity?run_id=r-1" });
  t.is(page.statusCode, 303);
  t.is(page.headers.location, `/login?next=${encodeURIComponent("/app/activity?run_id=r-1")}`);
  t.is((await app.inject({ url: "/app" })).headers.location, "/app/");
});

test("dashboard static - hashed assets are immutable for a year, under the CSP; unknown ones are 404", async (t) => {
  const dist = join(dir, "assets-only");
  mkdirSync(join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "index.html"), "<!doctype html>");
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

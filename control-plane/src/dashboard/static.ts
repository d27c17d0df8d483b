// The web dashboard (web/, built into web/dist by `make build`) under /app/: the
// hashed assets cached for a year, index.html never cached and answered for every
// page path (the pages route in the browser), all under a CSP that allows no
// inline script or style. A path that is no page (dist/manifest.json lists them) gets
// the same index.html, which shows "not found", with a 404. `/` leads a signed-in
// person to /app/ and anyone else to sign in. The pages are clients of the public API;
// nothing here reads data.
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { currentSession } from "../accounts/sessions.js";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";

/** <repo>/web/dist from control-plane/dist/dashboard/static.js (and from src/ under tsx). */
export const WEB_DIST = resolve(__dirname, "../../../web/dist");

/** The dashboard's CSP: no inline script or style; /docs is held to it too (observability/openapi.ts). */
export const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

export function secureHeaders(reply: FastifyReply): void {
  reply.header("content-security-policy", CSP);
  reply.header("x-content-type-options", "nosniff");
  reply.header("referrer-policy", "same-origin");
  reply.header("x-frame-options", "DENY");
}

// Pages, not API: left out of the OpenAPI document, like @fastify/static's asset routes
// (schemaHide defaults to true there).
const PAGE = {
  tag: "observability",
  hidden: true,
  access: { public: "the session cookie: without one a page leads to sign-in" },
} as const;

/** What web/build.mjs says of the build: the page paths (web/src/paths.ts) and the favicon's file. */
interface Manifest {
  pages: string[];
  favicon: string;
}

function readManifest(dist: string): Manifest | undefined {
  const file = join(dist, "manifest.json");
  if (!existsSync(join(dist, "index.html")) || !existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as Manifest;
}

/**
 * Whether a path is one of the pages: "/app/applications/:id" matches one non-empty
 * segment per :param, a trailing slash ignored; /app/ itself is the home page. The same
 * rule as web/src/paths.ts matchPage (another program: the browser's).
 */
export function isPage(pages: string[], url: string): boolean {
  const pathname = url.split("?")[0].replace(/\/+$/, "");
  if (pathname === "/app") return true;
  const parts = pathname.split("/");
  return pages.some((page) => {
    const pattern = page.split("/");
    return (
      pattern.length === parts.length &&
      pattern.every((seg, i) => (seg.startsWith(":") ? parts[i] !== "" : seg === parts[i]))
    );
  });
}

/** The dashboard's pages; its assets are dashboardAssets' (reply.sendFile comes from there). */
export function dashboardRoutes(ctx: ApiContext, dist = WEB_DIST): RouteSpec[] {
  const manifest = readManifest(dist);
  const page = async (req: FastifyRequest, reply: FastifyReply) => {
    if (!manifest) throw new RcError("RC_ERR_DASHBOARD_NOT_BUILT");
    // Signed out: straight to sign-in and back here, without loading the page first.
    if (!(await currentSession(ctx.db, req)))
      return reply.redirect(`/login?next=${encodeURIComponent(req.url)}`, 303);
    secureHeaders(reply);
    reply.header("cache-control", "no-store");
    // No such page: still the dashboard (its own "not found" view, the navigation), but a 404.
    if (!isPage(manifest.pages, req.url)) reply.code(404);
    return reply.sendFile("index.html", dist, { cacheControl: false });
  };
  // Browsers ask for /favicon.ico on pages that name no icon (the sign-in pages, /docs).
  const favicon = async (_req: FastifyRequest, reply: FastifyReply) => {
    if (!manifest) throw new RcError("RC_ERR_DASHBOARD_NOT_BUILT");
    // Not kept: the next build names the icon anew and removes this one.
    reply.header("cache-control", "no-cache");
    return reply.redirect(`/app/assets/${manifest.favicon}`, 302);
  };
  return [
    route({
      ...PAGE,
      method: "GET",
      url: "/",
      handler: async (req, reply) => {
        const session = await currentSession(ctx.db, req);
        return reply.redirect(session ? "/app/" : "/login?next=/app/", 303);
      },
    }),
    route({ ...PAGE, method: "GET", url: "/favicon.ico", handler: favicon }),
    route({ ...PAGE, method: "GET", url: "/app", handler: (_req, reply) => reply.redirect("/app/", 301) }),
    route({ ...PAGE, method: "GET", url: "/app/", handler: page }),
    route({ ...PAGE, method: "GET", url: "/app/*", handler: page }),
  ];
}

/**
 * The hashed assets under /app/assets/ (@fastify/static's own routes), when the
 * dashboard is built. Not encapsulated: the pages' reply.sendFile is its decorator.
 */
export const dashboardAssets = (dist = WEB_DIST) =>
  fp(
    async (app: FastifyInstance) => {
      if (!existsSync(join(dist, "index.html"))) return;
      await app.register(fastifyStatic, {
        root: join(dist, "assets"),
        prefix: "/app/assets/",
        // Names carry a content hash: a changed file is a new name.
        immutable: true,
        maxAge: "365d",
        index: false,
        setHeaders: (res) => {
          res.header("content-security-policy", CSP);
          res.header("x-content-type-options", "nosniff");
        },
      });
    },
    { name: "relayctl-dashboard-assets", fastify: "5.x" },
  );

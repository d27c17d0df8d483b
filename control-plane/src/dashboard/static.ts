// The web dashboard (web/, built into web/dist by `make build`) under /app/: the
// hashed assets cached for a year, index.html never cached and answered for every
// page path (the pages route in the browser), all under a CSP that allows no
// inline script or style. `/` leads a signed-in person to /app/ and anyone else to
// sign in. The pages are clients of the public API; nothing here reads data.
import { existsSync } from "node:fs";
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

/** The dashboard's pages; its assets are dashboardAssets' (reply.sendFile comes from there). */
export function dashboardRoutes(ctx: ApiContext, dist = WEB_DIST): RouteSpec[] {
  const built = existsSync(join(dist, "index.html"));
  const page = async (req: FastifyRequest, reply: FastifyReply) => {
    if (!built) throw new RcError("RC_ERR_DASHBOARD_NOT_BUILT");
    // Signed out: straight to sign-in and back here, without loading the page first.
    if (!(await currentSession(ctx.db, req)))
      return reply.redirect(`/login?next=${encodeURIComponent(req.url)}`, 303);
    secureHeaders(reply);
    reply.header("cache-control", "no-store");
    return reply.sendFile("index.html", dist, { cacheControl: false });
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

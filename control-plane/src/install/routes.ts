// The one-line agent install, on the api role and without credentials (nothing here is secret):
//   GET /install.sh                    deploy/install.sh with this control plane's base URL filled in
//   GET /agent/latest                  {version, bundles: [{arch, url, sha256}]}
//   GET /agent/{version}/{file}        a bundle tarball (the agent with its own Node.js and node-pty,
//                                      ~45 MB), or its `.sha256` (sha256sum format)
// The bundles are built ahead by scripts/agent-bundle.mjs (make build); this only serves them.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import type { ApiContext } from "../http/context.js";
import { RcError } from "../errors.js";
import { fillBaseUrl, installBaseUrl } from "./base-url.js";
import { locateBundleFile, readLatest } from "./bundles.js";

const fileParams = z.object({ version: z.string().max(100), file: z.string().max(300) });

export const installRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { bundleDir, installerFile } = ctx.config.install;

    const baseUrl = (req: FastifyRequest): string => installBaseUrl(ctx.config.accounts.publicUrl, req);

    // Tags and summaries for the OpenAPI document, where one is generated from the routes.
    const doc = (summary: string) => ({ tags: ["agents"], summary });

    app.get("/install.sh", { schema: doc("the agent installer (POSIX sh)") }, async (req, reply) => {
      const script = await readFile(installerFile, "utf8").catch((err: unknown) => {
        throw new RcError(
          "RC_ERR_AGENT_BUNDLE_UNAVAILABLE",
          "the installer is missing from this control plane",
          {
            cause: err,
          },
        );
      });
      const filled = fillBaseUrl(script, baseUrl(req));
      return reply.type("text/x-shellscript; charset=utf-8").header("cache-control", "no-cache").send(filled);
    });

    app.get("/agent/latest", { schema: doc("the current agent version and its bundles") }, async (req) => {
      const latest = await readLatest(bundleDir);
      const base = baseUrl(req);
      return {
        version: latest.version,
        bundles: latest.bundles.map((b) => ({
          arch: b.arch,
          url: `${base}/agent/${latest.version}/${b.file}`,
          sha256: b.sha256,
        })),
      };
    });

    app.get(
      "/agent/:version/:file",
      { schema: { ...doc("an agent bundle (.tar.gz) or its .sha256"), params: fileParams } },
      async (req, reply) => {
        const { version, file } = req.params;
        const found = await locateBundleFile(bundleDir, version, file);
        const type = file.endsWith(".sha256") ? "text/plain; charset=utf-8" : "application/gzip";
        return reply
          .type(type)
          .header("content-length", found.size)
          .header("cache-control", "no-cache")
          .send(createReadStream(found.path));
      },
    );
  };

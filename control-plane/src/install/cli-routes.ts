// The CLI for other machines, on the api role and without credentials (nothing here is secret):
//   GET /cli/install.sh            cli/install.sh with this control plane's base URL filled in
//   GET /cli/latest                {version, file, sha256, size, url}
//   GET /cli/{version}/{file}      relayctl-<version>.cjs, or its `.sha256` (sha256sum format)
// The bundle is built ahead by scripts/cli-bundle.mjs (make build, make dev); this only serves it.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ApiContext } from "../http/context.js";
import { RcError } from "../errors.js";
import { fillBaseUrl, installBaseUrl } from "./base-url.js";
import { locateCliFile, readLatestCli } from "./cli-bundle.js";

const fileParams = z.object({ version: z.string().max(100), file: z.string().max(300) });

export const cliInstallRoutes =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    const { cliBundleDir, cliInstallerFile } = ctx.config.install;
    const doc = (summary: string) => ({ tags: ["cli"], summary });

    app.get("/cli/install.sh", { schema: doc("the CLI installer (POSIX sh)") }, async (req, reply) => {
      const base = installBaseUrl(ctx.config.accounts.publicUrl, req);
      const script = await readFile(cliInstallerFile, "utf8").catch((err: unknown) => {
        throw new RcError(
          "RC_ERR_CLI_BUNDLE_UNAVAILABLE",
          "the CLI installer is missing from this control plane",
          {
            cause: err,
          },
        );
      });
      return reply
        .type("text/x-shellscript; charset=utf-8")
        .header("cache-control", "no-cache")
        .send(fillBaseUrl(script, base));
    });

    app.get("/cli/latest", { schema: doc("the current CLI version and its single file") }, async (req) => {
      const latest = await readLatestCli(cliBundleDir);
      const base = installBaseUrl(ctx.config.accounts.publicUrl, req);
      return { ...latest, url: `${base}/cli/${latest.version}/${latest.file}` };
    });

    app.get(
      "/cli/:version/:file",
      {
        schema: {
          ...doc("the CLI in one file (.cjs, run with Node >= 24) or its .sha256"),
          params: fileParams,
        },
      },
      async (req, reply) => {
        const { version, file } = req.params;
        const found = await locateCliFile(cliBundleDir, version, file);
        const type = file.endsWith(".sha256") ? "text/plain; charset=utf-8" : "application/javascript";
        return reply
          .type(type)
          .header("content-length", found.size)
          .header("cache-control", "no-cache")
          .send(createReadStream(found.path));
      },
    );
  };

// The CLI for other machines, on the api role and without credentials (nothing here is secret):
//   GET /cli/install.sh            cli/install.sh with this control plane's base URL filled in
//   GET /cli/latest                {version, file, sha256, size, url}
//   GET /cli/{version}/{file}      relayctl-<version>.cjs, or its `.sha256` (sha256sum format)
// The bundle is built ahead by scripts/cli-bundle.mjs (make build, make dev); this only serves it.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { RcError } from "../errors.js";
import { cliLatest } from "../http/answers.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import { fillBaseUrl, installBaseUrl } from "./base-url.js";
import { locateCliFile, readLatestCli } from "./cli-bundle.js";

const fileParams = z.object({ version: z.string().max(100), file: z.string().max(300) });

const access = { public: "the CLI's installer and single file: nothing here is secret" };

export function cliInstallRoutes(ctx: ApiContext): RouteSpec[] {
  const { cliBundleDir, cliInstallerFile } = ctx.config.install;
  return [
    route({
      method: "GET",
      url: "/cli/install.sh",
      access,
      tag: "cli",
      summary: "the CLI installer (POSIX sh)",
      handler: async (req, reply) => {
        const base = installBaseUrl(ctx.config, req);
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
      },
    }),
    route({
      method: "GET",
      url: "/cli/latest",
      access,
      tag: "cli",
      summary: "the current CLI version and its single file",
      responses: { 200: cliLatest },
      handler: async (req) => {
        const latest = await readLatestCli(cliBundleDir);
        const base = installBaseUrl(ctx.config, req);
        return { ...latest, url: `${base}/cli/${latest.version}/${latest.file}` };
      },
    }),
    route({
      method: "GET",
      url: "/cli/:version/:file",
      access,
      tag: "cli",
      summary: "the CLI in one file (.cjs, run with Node >= 24) or its .sha256",
      schema: { params: fileParams },
      handler: async (req, reply) => {
        const { version, file } = req.params;
        const found = await locateCliFile(cliBundleDir, version, file);
        const type = file.endsWith(".sha256") ? "text/plain; charset=utf-8" : "application/javascript";
        return reply
          .type(type)
          .header("content-length", found.size)
          .header("cache-control", "no-cache")
          .send(createReadStream(found.path));
      },
    }),
  ];
}

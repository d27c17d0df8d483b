// The one-line agent install, on the api role and without credentials (nothing here is secret):
//   GET /install.sh                    deploy/install.sh with this control plane's base URL filled in
//   GET /agent/latest                  {version, bundles: [{arch, url, sha256}]}
//   GET /agent/{version}/{file}        a bundle tarball (the agent with its own Node.js and node-pty,
//                                      ~45 MB), its `.sha256` (sha256sum format), or its `.sig`
//                                      (base64 Ed25519 signature, install/signing.ts)
// The bundles are built ahead by scripts/agent-bundle.mjs (make build); this only serves them.
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { RcError } from "../errors.js";
import type { ApiContext } from "../http/context.js";
import { type RouteSpec, route } from "../http/route.js";
import { fillBaseUrl, installBaseUrl } from "./base-url.js";
import { locateBundleFile, readLatest } from "./bundles.js";
import { bundleSigner, fillSigningKey } from "./signing.js";

const fileParams = z.object({ version: z.string().max(100), file: z.string().max(300) });

const access = { public: "the agent's installer and bundles: nothing here is secret" };

export function installRoutes(ctx: ApiContext): RouteSpec[] {
  const { bundleDir, installerFile } = ctx.config.install;
  const baseUrl = (req: FastifyRequest): string => installBaseUrl(ctx.config, req);
  const signer = bundleSigner(ctx.config);
  return [
    route({
      method: "GET",
      url: "/install.sh",
      access,
      tag: "agents",
      summary: "the agent installer (POSIX sh)",
      handler: async (req, reply) => {
        const script = await readFile(installerFile, "utf8").catch((err: unknown) => {
          throw new RcError(
            "RC_ERR_AGENT_BUNDLE_UNAVAILABLE",
            "the installer is missing from this control plane",
            {
              cause: err,
            },
          );
        });
        const filled = fillSigningKey(fillBaseUrl(script, baseUrl(req)), signer.publicKey);
        return reply
          .type("text/x-shellscript; charset=utf-8")
          .header("cache-control", "no-cache")
          .send(filled);
      },
    }),
    route({
      method: "GET",
      url: "/agent/latest",
      access,
      tag: "agents",
      summary: "the current agent version and its bundles",
      handler: async (req) => {
        const latest = await readLatest(bundleDir);
        const base = baseUrl(req);
        return {
          version: latest.version,
          signing_key: signer.publicKey,
          bundles: latest.bundles.map((b) => ({
            arch: b.arch,
            url: `${base}/agent/${latest.version}/${b.file}`,
            sha256: b.sha256,
            signature: signer.sign(b.file, b.sha256),
          })),
        };
      },
    }),
    route({
      method: "GET",
      url: "/agent/:version/:file",
      access,
      tag: "agents",
      summary: "an agent bundle (.tar.gz), its .sha256, or its .sig (install/signing.ts)",
      schema: { params: fileParams },
      handler: async (req, reply) => {
        const { version, file } = req.params;
        if (file.endsWith(".sig")) {
          // Signs what the .sha256 beside the bundle says (it is what latest.json says too).
          const bundle = file.slice(0, -".sig".length);
          const sum = await locateBundleFile(bundleDir, version, `${bundle}.sha256`);
          const sha256 = (await readFile(sum.path, "utf8")).split(/\s/)[0] ?? "";
          return reply
            .type("text/plain; charset=utf-8")
            .header("cache-control", "no-cache")
            .send(`${signer.sign(bundle, sha256)}\n`);
        }
        const found = await locateBundleFile(bundleDir, version, file);
        const type = file.endsWith(".sha256") ? "text/plain; charset=utf-8" : "application/gzip";
        return reply
          .type(type)
          .header("content-length", found.size)
          .header("cache-control", "no-cache")
          .send(createReadStream(found.path));
      },
    }),
  ];
}

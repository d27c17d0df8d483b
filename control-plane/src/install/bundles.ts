// The agent bundles on disk, as scripts/agent-bundle.mjs leaves them: latest.json names the
// current version and each arch's file and SHA-256; files are looked up by a name of one
// fixed shape only, so a request path can never reach outside the folder.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { RcError } from "../errors.js";

export const VERSION_PATTERN = /^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/;
const ARCHES = ["x64", "arm64"] as const;

const latestSchema = z.object({
  version: z.string().regex(VERSION_PATTERN),
  bundles: z
    .array(
      z.object({
        arch: z.enum(ARCHES),
        file: z.string(),
        sha256: z.string().regex(/^[0-9a-f]{64}$/),
      }),
    )
    .min(1),
});

export type LatestBundles = z.infer<typeof latestSchema>;

function unavailable(why: string, cause?: unknown): RcError {
  return new RcError("RC_ERR_AGENT_BUNDLE_UNAVAILABLE", `no agent bundle to serve: ${why}`, { cause });
}

/** latest.json, read at each call: a rebuild is served without a restart. */
export async function readLatest(dir: string): Promise<LatestBundles> {
  let text: string;
  try {
    text = await readFile(join(dir, "latest.json"), "utf8");
  } catch (err) {
    throw unavailable("the control plane's agent bundles are not built (make build)", err);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw unavailable("latest.json is not JSON", err);
  }
  const parsed = latestSchema.safeParse(json);
  if (!parsed.success) throw unavailable("latest.json is not what scripts/agent-bundle.mjs writes");
  return parsed.data;
}

/** `relayctl-agent-<version>-linux-<arch>.tar.gz` or its `.sha256`, else undefined. */
export function bundleFileName(version: string, file: string): string | undefined {
  if (!VERSION_PATTERN.test(version)) return undefined;
  const prefix = `relayctl-agent-${version}-linux-`;
  if (!file.startsWith(prefix)) return undefined;
  return /^(x64|arm64)\.tar\.gz(\.sha256)?$/.test(file.slice(prefix.length)) ? file : undefined;
}

/** The path and size of a bundle file, or RC_ERR_AGENT_BUNDLE_NOT_FOUND. */
export async function locateBundleFile(
  dir: string,
  version: string,
  file: string,
): Promise<{ path: string; size: number }> {
  const name = bundleFileName(version, file);
  const notFound = new RcError(
    "RC_ERR_AGENT_BUNDLE_NOT_FOUND",
    `agent bundle file '${file.slice(0, 200)}' of version '${version.slice(0, 64)}' not found`,
  );
  if (!name) throw notFound;
  const path = join(dir, name);
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) throw notFound;
  return { path, size: info.size };
}

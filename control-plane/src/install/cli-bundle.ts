// The single-file CLI on disk, as scripts/cli-bundle.mjs leaves it: latest.json names the current
// version, its file, SHA-256 and size; files are looked up by a name of one fixed shape only
// (relayctl-<version>.cjs and its .sha256), so a request path can never reach outside the folder.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { RcError } from "../errors.js";
import { VERSION_PATTERN } from "./bundles.js";

const latestSchema = z.object({
  version: z.string().regex(VERSION_PATTERN),
  file: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  size: z.int().nonnegative(),
});

export type LatestCli = z.infer<typeof latestSchema>;

function unavailable(why: string, cause?: unknown): RcError {
  return new RcError("RC_ERR_CLI_BUNDLE_UNAVAILABLE", `no CLI bundle to serve: ${why}`, { cause });
}

/** latest.json, read at each call: a rebuild is served without a restart. */
export async function readLatestCli(dir: string): Promise<LatestCli> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(join(dir, "latest.json"), "utf8"));
  } catch (err) {
    throw unavailable("the control plane's CLI bundle is not built (make build, or make dev)", err);
  }
  const parsed = latestSchema.safeParse(json);
  if (!parsed.success || parsed.data.file !== cliFileName(parsed.data.version, parsed.data.file))
    throw unavailable("latest.json is not what scripts/cli-bundle.mjs writes");
  return parsed.data;
}

/** `relayctl-<version>.cjs` or its `.sha256`, else undefined. */
export function cliFileName(version: string, file: string): string | undefined {
  if (!VERSION_PATTERN.test(version)) return undefined;
  const name = `relayctl-${version}.cjs`;
  return file === name || file === `${name}.sha256` ? file : undefined;
}

/** The path and size of a CLI bundle file, or RC_ERR_CLI_BUNDLE_NOT_FOUND. */
export async function locateCliFile(
  dir: string,
  version: string,
  file: string,
): Promise<{ path: string; size: number }> {
  const name = cliFileName(version, file);
  const notFound = new RcError(
    "RC_ERR_CLI_BUNDLE_NOT_FOUND",
    `CLI bundle file '${file.slice(0, 200)}' of version '${version.slice(0, 64)}' not found`,
  );
  if (!name) throw notFound;
  const path = join(dir, name);
  const info = await stat(path).catch(() => undefined);
  if (!info?.isFile()) throw notFound;
  return { path, size: info.size };
}

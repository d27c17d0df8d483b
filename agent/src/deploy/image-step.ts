// The build step: a Dockerfile build of the exported commit, tagged
// relayctl/<application id>:<sha12>-<build key 12> (naming.ts; no labels:
// image-ledger.ts says why) and recorded in the agent's image ledger, or a
// pull of a prebuilt image (through a temporary auth file when the
// application has a registry credential), or for a rollback the image a
// release already ran, looked up on the server and never built. Retention
// (retire.ts) keeps the images of the application's last releases, so a
// rollback is a start and a switch, not a rebuild.
//
// The build key (naming.ts: the commit, the Dockerfile and context paths, the
// engine) is in the tag and the ledger. A deployment of a commit already built
// the same way finds the ledger's entry for its key, and runs that image as it
// is when the engine still has it under that tag with the recorded id (one image
// inspect, beside the fetch's export): the step says which deployment built it.
// No entry: no engine call, the build starts as soon as the export is done.
// Same inputs, same image: the build would only redo the cached layers and tag
// the same result. Retention still sees it as this release's image (its tag and
// id are the release's), and a failure does not remove it (another release's).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { DeployJob } from "@relayctl/proto";
import { STORE_RACE, imageIdOf } from "../engine/engine.js";
import { type DeployContext, StepError, callOptions, check } from "./context.js";
import type { FetchedSource } from "./git-fetch.js";
import { buildKey, builtImageTag, validImageReference } from "./naming.js";
import { realInsideRepo } from "./repo-paths.js";

/** The image the new container runs; `reusedFrom` when an earlier deployment built it. */
export interface BuiltImage {
  image: string;
  /** Known without another inspect: the build's --iidfile, the reused image's, or the rollback's. */
  imageId?: string;
  /** The deployment that built the reused image. */
  reusedFrom?: string;
}

/** An image built before for the same inputs, under the tag this build would give. */
export interface FoundImage {
  tag: string;
  imageId: string;
  deploymentId: string;
}

/** The job's Dockerfile and context paths as the build uses them. */
function buildPaths(ctx: DeployContext): { dockerfileRel: string; contextRel: string } | undefined {
  const build = ctx.job.build;
  if (build?.$case !== "dockerfile") return undefined;
  return {
    dockerfileRel: build.dockerfile.dockerfile || "Dockerfile",
    contextRel: build.dockerfile.context || ".",
  };
}

function keyOf(ctx: DeployContext, sha: string, paths: { dockerfileRel: string; contextRel: string }) {
  const { applicationId } = ctx.job;
  const inputs = { commitSha: sha, dockerfile: paths.dockerfileRel, context: paths.contextRel };
  return buildKey({ applicationId, ...inputs, engine: ctx.engine.name });
}

/**
 * Looks for an image of this commit built with the same key: the ledger's entry,
 * checked against the engine (one image inspect, started as soon as the fetch
 * knows the commit, beside its export). Never rejects: any failure to answer,
 * or an image gone or re-tagged since, is a miss, and the build runs.
 */
export async function findBuilt(ctx: DeployContext, sha: string): Promise<FoundImage | undefined> {
  const paths = buildPaths(ctx);
  if (paths === undefined) return undefined;
  const entry = ctx.ledger.built(ctx.job.applicationId, keyOf(ctx, sha, paths));
  if (entry === undefined) return undefined;
  try {
    const o = await ctx.engine.imageId(entry.tag, callOptions(ctx));
    if (o.status !== "completed" || o.exitCode !== 0) return undefined;
    const imageId = imageIdOf(o.stdout);
    if (imageId === undefined || imageId !== entry.imageId) return undefined;
    return { tag: entry.tag, imageId, deploymentId: entry.deploymentId };
  } catch {
    return undefined;
  }
}

/** Returns the image the new container runs; `found`: what findBuilt answered for this commit. */
export async function buildImage(
  ctx: DeployContext,
  source: FetchedSource | undefined,
  found?: Promise<FoundImage | undefined>,
): Promise<BuiltImage> {
  const { job, engine, rec } = ctx;
  const build = job.build;
  if (build?.$case === "image") return { image: await pull(ctx, build.image) };
  if (build?.$case === "release") return kept(ctx, build.release.image, build.release.deploymentId);
  const paths = buildPaths(ctx);
  if (paths === undefined) throw new StepError("the job names no build (dockerfile or image)");
  if (source === undefined) throw new StepError("a dockerfile build needs the application's git repository");
  const { dockerfileRel, contextRel } = paths;
  const prior = await found;
  if (prior !== undefined) {
    const by = prior.deploymentId || "an earlier deployment";
    rec.log("build", `reused image ${prior.imageId} built by deployment ${by} (same commit and build)`);
    return { image: prior.tag, imageId: prior.imageId, reusedFrom: by };
  }
  const dockerfile = await realInsideRepo(source.root, dockerfileRel);
  if (dockerfile === undefined)
    throw new StepError(`dockerfile '${dockerfileRel}' is not a file inside the repository`);
  const contextDir = await realInsideRepo(source.root, contextRel);
  if (contextDir === undefined)
    throw new StepError(`build context '${contextRel}' is not inside the repository`);
  const key = keyOf(ctx, source.commit.sha, paths);
  const tag = builtImageTag(job.applicationId, source.commit.sha, key);
  rec.log(
    "build",
    `building ${tag} with ${engine.name} (dockerfile ${dockerfileRel}, context ${contextRel})`,
  );
  const live = (text: string, from?: "stdout" | "stderr") => rec.stream("build", text, from);
  // The id the engine writes there is the release's image id: no inspect after the build.
  const iidFile = join(source.dir, "image-id");
  const spec = { contextDir, dockerfile, tag, iidFile };
  let o = await engine.build(spec, { ...callOptions(ctx), onOutput: live });
  if (o.status === "completed" && o.exitCode !== 0 && STORE_RACE.test(o.stderr + o.stdout)) {
    rec.log(
      "build",
      "the engine's image store changed under the build (another image removed); building again",
    );
    o = await engine.build(spec, { ...callOptions(ctx), onOutput: live });
  }
  check(o, `${engine.name} build`);
  const imageId =
    imageIdOf(await readFile(iidFile, "utf8").catch(() => "")) ?? (await imageIdOfRef(ctx, tag));
  // Not awaited: the write is off the deployment's path (image-ledger.ts says what a lost one costs).
  void ctx.ledger.record({
    applicationId: job.applicationId,
    buildKey: key,
    tag,
    imageId,
    deploymentId: job.deploymentId,
    builtAtMs: Date.now(),
    usedAtMs: Date.now(),
  });
  return { image: tag, imageId };
}

/**
 * A rollback's image: on the server, with its id (from the one inspect that found it: no
 * other after it), or the step fails naming the release.
 */
async function kept(ctx: DeployContext, image: string, deploymentId: string): Promise<BuiltImage> {
  if (!validImageReference(image)) throw new StepError(`invalid image reference '${image.slice(0, 200)}'`);
  const o = await ctx.engine.imageId(image, callOptions(ctx));
  const imageId = o.status === "completed" && o.exitCode === 0 ? imageIdOf(o.stdout) : undefined;
  if (imageId === undefined) {
    if (o.status !== "completed" && o.error) check(o, `${ctx.engine.name} image inspect`);
    throw new StepError(
      `the image ${image} of release ${deploymentId} is no longer on this server (retention removed it, or someone did by hand): deploy that commit again`,
    );
  }
  ctx.rec.log(
    "build",
    `rollback to release ${deploymentId}: image ${image} is on the server; nothing to build`,
  );
  return { image, imageId };
}

/** The engine's id of the image the container runs (`sha256:<hex>`): what the release records. */
export async function imageIdOfRef(ctx: DeployContext, image: string): Promise<string> {
  const o = check(await ctx.engine.imageId(image, callOptions(ctx)), `${ctx.engine.name} image inspect`);
  const id = imageIdOf(o.stdout);
  if (id === undefined) throw new StepError(`${ctx.engine.name} image inspect printed no image id`);
  return id;
}

async function pull(ctx: DeployContext, image: Extract<DeployJob["build"], { $case: "image" }>["image"]) {
  const ref = image.image;
  if (!validImageReference(ref)) throw new StepError(`invalid image reference '${ref.slice(0, 200)}'`);
  const auth = image.auth
    ? { registry: image.auth.registry, username: image.auth.username, password: image.auth.password }
    : undefined;
  ctx.rec.log("build", `pulling ${ref}${auth ? ` (logged in to ${auth.registry} as ${auth.username})` : ""}`);
  const live = (text: string, from?: "stdout" | "stderr") => ctx.rec.stream("build", text, from);
  const o = await ctx.engine.pull(ref, auth, { ...callOptions(ctx), onOutput: live });
  check(o, `${ctx.engine.name} pull`);
  return ref;
}

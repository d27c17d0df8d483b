// The build step: a Dockerfile build of the exported commit, tagged
// relayctl/<application id>:<sha12> and labelled with the application and
// deployment, or a pull of a prebuilt image (through a temporary auth file when
// the application has a registry credential), or for a rollback the image a
// release already ran, looked up on the server and never built. Retention
// (retire.ts) keeps the images of the application's last releases, so a
// rollback is a start and a switch, not a rebuild.
import type { DeployJob } from "@relayctl/proto";
import { imageIdOf } from "../engine/engine.js";
import { type DeployContext, StepError, callOptions, check } from "./context.js";
import type { FetchedSource } from "./git-fetch.js";
import { builtImageTag, deployLabels, validImageReference } from "./naming.js";
import { realInsideRepo } from "./repo-paths.js";

/** Returns the image the new container runs. */
export async function buildImage(ctx: DeployContext, source: FetchedSource | undefined): Promise<string> {
  const { job, engine, rec } = ctx;
  const build = job.build;
  if (build?.$case === "image") return pull(ctx, build.image);
  if (build?.$case === "release") return kept(ctx, build.release.image, build.release.deploymentId);
  if (build?.$case !== "dockerfile") throw new StepError("the job names no build (dockerfile or image)");
  if (source === undefined) throw new StepError("a dockerfile build needs the application's git repository");
  const dockerfileRel = build.dockerfile.dockerfile || "Dockerfile";
  const contextRel = build.dockerfile.context || ".";
  const dockerfile = await realInsideRepo(source.root, dockerfileRel);
  if (dockerfile === undefined)
    throw new StepError(`dockerfile '${dockerfileRel}' is not a file inside the repository`);
  const contextDir = await realInsideRepo(source.root, contextRel);
  if (contextDir === undefined)
    throw new StepError(`build context '${contextRel}' is not inside the repository`);
  const tag = builtImageTag(job.applicationId, source.commit.sha, job.deploymentId);
  rec.log(
    "build",
    `building ${tag} with ${engine.name} (dockerfile ${dockerfileRel}, context ${contextRel})`,
  );
  const labels = deployLabels(job.applicationId, job.deploymentId);
  const live = (text: string, from?: "stdout" | "stderr") => rec.stream("build", text, from);
  const spec = { contextDir, dockerfile, tag, labels };
  let o = await engine.build(spec, { ...callOptions(ctx), onOutput: live });
  if (o.status === "completed" && o.exitCode !== 0 && STORE_RACE.test(o.stderr + o.stdout)) {
    rec.log(
      "build",
      "the engine's image store changed under the build (another image removed); building again",
    );
    o = await engine.build(spec, { ...callOptions(ctx), onOutput: live });
  }
  check(o, `${engine.name} build`);
  return tag;
}

/** A rollback's image: on the server, or the step fails naming the release. */
async function kept(ctx: DeployContext, image: string, deploymentId: string): Promise<string> {
  if (!validImageReference(image)) throw new StepError(`invalid image reference '${image.slice(0, 200)}'`);
  const o = await ctx.engine.imageId(image, callOptions(ctx));
  if (o.status !== "completed" || o.exitCode !== 0 || imageIdOf(o.stdout) === undefined) {
    if (o.status !== "completed" && o.error) check(o, `${ctx.engine.name} image inspect`);
    throw new StepError(
      `the image ${image} of release ${deploymentId} is no longer on this server (retention removed it, or someone did by hand): deploy that commit again`,
    );
  }
  ctx.rec.log(
    "build",
    `rollback to release ${deploymentId}: image ${image} is on the server; nothing to build`,
  );
  return image;
}

/** The engine's id of the image the container runs (`sha256:<hex>`): what the release records. */
export async function imageIdOfRef(ctx: DeployContext, image: string): Promise<string> {
  const o = check(await ctx.engine.imageId(image, callOptions(ctx)), `${ctx.engine.name} image inspect`);
  const id = imageIdOf(o.stdout);
  if (id === undefined) throw new StepError(`${ctx.engine.name} image inspect printed no image id`);
  return id;
}

/**
 * podman's layer cache lookup fails when an image it considered is removed at
 * that moment (another application's retire pruning its old images): a race of
 * the shared store, worth one more try.
 */
const STORE_RACE = /layer not known|image not known|identifier is not a layer/;

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

// A redeploy of a commit already built the same way runs that image without a
// build (agent/src/deploy/image-step.ts): the agent's image ledger has the build
// key (commit, Dockerfile and context paths, engine), and podman still has the
// image under the key's tag with the recorded id. Built images carry no labels
// (image-ledger.ts), so retention and the ledger must find them by tag and id:
// an image retention removed, or one removed by hand, is built again. The agent's
// deployer in-process against a real podman and Caddy (harness/pipeline-stack.ts),
// as deploy-pipeline.test.ts.
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DeployJob, type DeployReport, JobStatus } from "@relayctl/proto";
import test from "ava";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import {
  BASE_IMAGE,
  appImageIds,
  podman,
  podmanAgentEnv,
  removeAppContainers,
  removeAppImages,
} from "./harness/containers";
import { createAppRepo } from "./harness/git-repo";
import { type PipelineStack, startPipelineStack } from "./harness/pipeline-stack";
import { proxyGet } from "./harness/proxy-client";

// The engine CLI the pipeline runs inherits this process's environment.
process.env.CONTAINERS_CONF = podmanAgentEnv.CONTAINERS_CONF;

test.after.always(cleanupAll);

let stack: PipelineStack;
test.before(async () => {
  stack = await startPipelineStack({ drainSeconds: 1 });
});

async function deploy(j: DeployJob): Promise<DeployReport> {
  const result = await stack.deployer.run(randomUUID(), j);
  if (result.detail?.$case !== "deploy") throw new Error(`no DeployReport: ${JSON.stringify(result)}`);
  if (result.status !== JobStatus.JOB_STATUS_COMPLETED) throw new Error(`deploy failed: ${result.stderr}`);
  return result.detail.deploy;
}

const buildLog = (r: DeployReport) => r.steps.find((s) => s.name === "build")?.log ?? "";

test.serial(
  "deploy image reuse - a redeploy of a commit runs its image without a build; another Dockerfile or commit builds",
  async (t) => {
    const id = randomUUID();
    const suffix = id.slice(0, 6);
    const fqdn = `reuse-${suffix}.example.test`;
    // Files of this test only: podman gives a build of the same files the same image id, and
    // another test file's cleanup by id would take this test's images with its own.
    const repo = await createAppRepo({ first: `1-${suffix}` });
    // A second Dockerfile at the same commit: same files, another image (its label).
    writeFileSync(
      join(repo.path, "Dockerfile.alt"),
      `FROM ${BASE_IMAGE}\nCOPY www /www\nLABEL variant=alt\nCMD ["httpd","-f","-p","8080","-h","/www"]\n`,
    );
    await repo.git(["add", "-A"]);
    await repo.git(["commit", "-q", "-m", "Add Dockerfile.alt"]);
    const sha = await repo.git(["rev-parse", "HEAD"]);
    onCleanup(async () => {
      await removeAppContainers(id);
      await removeAppImages(id);
    });
    const job = (dockerfile = "Dockerfile", ref = "main", keepImages: string[] = []): DeployJob => ({
      deploymentId: randomUUID(),
      applicationId: id,
      applicationName: `reuse-${suffix}`,
      source: { repository: repo.path, ref, credential: undefined, allowLocalSources: true },
      build: { $case: "dockerfile", dockerfile: { dockerfile, context: "." } },
      containerPort: 8080,
      healthCheckPath: "/",
      healthCheckTimeoutSeconds: 20,
      env: {},
      fqdns: [fqdn],
      containerBaseName: `reuse-${suffix}`,
      deadlineUnixMs: Date.now() + 90_000,
      keepImages,
      limits: undefined,
    });
    const serving = async () => (await proxyGet(stack.caddy.httpPort, fqdn)).body;

    const first = await deploy(job());
    t.regex(buildLog(first), /building relayctl\//, "the first deploy of the commit builds");
    t.is(first.commit?.sha, sha);
    t.regex(first.image, new RegExp(`^relayctl/${id}:${sha.slice(0, 12)}-[0-9a-f]{12}$`));
    const [labels] = (
      await podman(["image", "inspect", "--format", "{{json .Config.Labels}}", first.image])
    ).stdout.split("\n");
    t.notRegex(labels ?? "", /relayctl\./, "the build put no label on the image");

    const again = await deploy(job());
    t.is(again.imageId, first.imageId, "the same image runs");
    t.is(again.image, first.image);
    t.notRegex(buildLog(again), /building /, "no build ran");
    t.regex(
      buildLog(again),
      new RegExp(`reused image ${first.imageId} built by deployment ${first.deploymentId}`),
    );
    t.is(await serving(), `version 1-${suffix}`);

    // Another Dockerfile of the same commit is another build configuration, under a tag of its own.
    const alt = await deploy(job("Dockerfile.alt"));
    t.regex(buildLog(alt), /building relayctl\/.*dockerfile Dockerfile\.alt/);
    t.not(alt.imageId, first.imageId);
    t.not(alt.image, first.image);
    // Going back to Dockerfile finds its own image again, never the alt one.
    const back = await deploy(job());
    t.is(back.imageId, first.imageId);
    t.regex(
      buildLog(back),
      new RegExp(`reused image ${first.imageId} built by deployment ${first.deploymentId}`),
    );
    const [variant] = (
      await podman(["image", "inspect", "--format", '{{index .Config.Labels "variant"}}', back.image])
    ).stdout
      .trim()
      .split("\n");
    t.is(variant, "", "the Dockerfile's image runs, not the alt one");

    // A new commit builds. Retention keeps the new image and the listed one (the control
    // plane's keep list: here the previous release's), finds the unlabelled alt image by its
    // tag and removes it, and the ledger forgets it.
    await repo.commitVersion(`2-${suffix}`);
    const next = await deploy(job("Dockerfile", "main", [first.imageId]));
    t.regex(buildLog(next), /building relayctl\//);
    t.not(next.imageId, back.imageId);
    t.is(await serving(), `version 2-${suffix}`);
    await stack.deployer.idle();
    t.deepEqual(await appImageIds(id), [next.imageId, first.imageId].sort(), "retention removed alt");
    const ledgerIds = () =>
      (
        JSON.parse(readFileSync(join(stack.stateDir, "images.json"), "utf8")) as {
          images: { imageId: string }[];
        }
      ).images
        .map((e) => e.imageId)
        .sort();
    t.deepEqual(ledgerIds(), [next.imageId, first.imageId].sort(), "the ledger holds what is still there");
    // The build whose image retention removed is built again.
    const altAgain = await deploy(job("Dockerfile.alt", sha, [next.imageId, first.imageId]));
    t.regex(buildLog(altAgain), /building relayctl\/.*dockerfile Dockerfile\.alt/);
    t.is(await serving(), `version 1-${suffix}`);

    // An image the ledger knows but someone removed by hand: built again, not a failure.
    await stack.deployer.idle();
    t.true(
      (await appImageIds(id)).includes(first.imageId),
      "first's image is still there before the hand removal",
    );
    await podman(["image", "rm", first.image]);
    const rebuilt = await deploy(job("Dockerfile", sha, [altAgain.imageId]));
    t.regex(buildLog(rebuilt), /building relayctl\//, "its image is gone: it builds");
    t.notRegex(buildLog(rebuilt), /reused image/);
    t.is(await serving(), `version 1-${suffix}`);
  },
);

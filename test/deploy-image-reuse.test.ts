// A redeploy of a commit already built the same way runs that image without a
// build (agent/src/deploy/image-step.ts): the build key on the image (commit,
// Dockerfile and context paths, engine) must match, under the tag the build
// would give. The agent's deployer in-process against a real podman and Caddy
// (harness/pipeline-stack.ts), as deploy-pipeline.test.ts.
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DeployJob, type DeployReport, JobStatus } from "@relayctl/proto";
import test from "ava";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { BASE_IMAGE, podman, podmanAgentEnv, removeAppContainers } from "./harness/containers";
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
    const repo = await createAppRepo({ first: "1" });
    // A second Dockerfile at the same commit: same files, another image (its label).
    writeFileSync(
      join(repo.path, "Dockerfile.alt"),
      `FROM ${BASE_IMAGE}\nCOPY www /www\nLABEL variant=alt\nCMD ["httpd","-f","-p","8080","-h","/www"]\n`,
    );
    await repo.git(["add", "-A"]);
    await repo.git(["commit", "-q", "-m", "Add Dockerfile.alt"]);
    const sha = await repo.git(["rev-parse", "HEAD"]);
    const images = new Set<string>();
    onCleanup(async () => {
      await removeAppContainers(id);
      for (const image of images) await podman(["image", "rm", "-f", image]).catch(() => undefined);
    });
    const job = (dockerfile = "Dockerfile"): DeployJob => ({
      deploymentId: randomUUID(),
      applicationId: id,
      applicationName: `reuse-${suffix}`,
      source: { repository: repo.path, ref: "main", credential: undefined, allowLocalSources: true },
      build: { $case: "dockerfile", dockerfile: { dockerfile, context: "." } },
      containerPort: 8080,
      healthCheckPath: "/",
      healthCheckTimeoutSeconds: 20,
      env: {},
      fqdns: [fqdn],
      containerBaseName: `reuse-${suffix}`,
      deadlineUnixMs: Date.now() + 90_000,
      keepImages: [],
      limits: undefined,
    });
    const serving = async () => (await proxyGet(stack.caddy.httpPort, fqdn)).body;

    const first = await deploy(job());
    images.add(first.imageId);
    t.regex(buildLog(first), /building relayctl\//, "the first deploy of the commit builds");
    t.is(first.commit?.sha, sha);

    const again = await deploy(job());
    t.is(again.imageId, first.imageId, "the same image runs");
    t.is(again.image, first.image);
    t.notRegex(buildLog(again), /building /, "no build ran");
    t.regex(
      buildLog(again),
      new RegExp(`reused image ${first.imageId} built by deployment ${first.deploymentId}`),
    );
    t.is(await serving(), "version 1");

    // Another Dockerfile of the same commit is another build configuration.
    const alt = await deploy(job("Dockerfile.alt"));
    images.add(alt.imageId);
    t.regex(buildLog(alt), /building relayctl\/.*dockerfile Dockerfile\.alt/);
    t.not(alt.imageId, first.imageId);
    // The tag now names the alt image: going back to Dockerfile must not take it for its own.
    const back = await deploy(job());
    images.add(back.imageId);
    t.regex(buildLog(back), /building relayctl\//, "the tag's image has another build key: it builds");
    const [label] = (
      await podman(["image", "inspect", "--format", '{{index .Config.Labels "variant"}}', back.image])
    ).stdout
      .trim()
      .split("\n");
    t.is(label, "", "the Dockerfile's image runs, not the alt one");

    // A new commit builds.
    await repo.commitVersion("2");
    const next = await deploy(job());
    images.add(next.imageId);
    t.regex(buildLog(next), /building relayctl\//);
    t.not(next.imageId, back.imageId);
    t.is(await serving(), "version 2");
  },
);

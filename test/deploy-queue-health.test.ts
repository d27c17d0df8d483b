// The agent's deployer in-process (agent/src/deploy) against a real podman, a real
// Caddy and git repositories on local paths (issue 29): a deployment that must wait
// for its application's turn says so in its log, with times, and starts once the one
// ahead has its result, not after its retire; an old container already gone when the
// retire comes is no failure; and the health check takes the answers curl takes
// (LF-only status and header lines, HTTP/1.0, no reason phrase), from a real server
// in the container (busybox httpd passes a CGI's own status line through as is).
import { randomUUID } from "node:crypto";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type DeployJob, DeployStepStatus, type JobProgress, JobStatus } from "@relayctl/proto";
import test from "ava";
import type { Deployer } from "../agent/src/deploy/deployer";
import type { CaddyServer } from "./harness/caddy";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { podman, podmanAgentEnv, removeAppContainers } from "./harness/containers";
import { type AppRepo, createAppRepo } from "./harness/git-repo";
import { startPipelineStack } from "./harness/pipeline-stack";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

/** Long enough for the test to remove an old container by hand before the retire comes. */
const DRAIN_SECONDS = 8;
const ISO = "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z";

process.env.CONTAINERS_CONF = podmanAgentEnv.CONTAINERS_CONF;
test.after.always(cleanupAll);

let caddy: CaddyServer;
let deployer: Deployer;
let progress: JobProgress[];

test.before(async () => {
  ({ caddy, deployer, progress } = await startPipelineStack({ drainSeconds: DRAIN_SECONDS }));
});

interface App {
  id: string;
  fqdn: string;
  base: string;
  repo: AppRepo;
}

async function makeApp(first: string): Promise<App> {
  const id = randomUUID();
  onCleanup(async () => {
    await deployer.idle();
    await removeAppContainers(id);
    // By the tags the deployments reported: listing images races other users of the machine's podman.
    for (const image of builtImages)
      if (image.includes(id)) await podman(["image", "rm", "-f", image]).catch(() => undefined);
  });
  const suffix = id.slice(0, 6);
  return {
    id,
    fqdn: `q-${suffix}.example.test`,
    base: `qtest-${suffix}`,
    repo: await createAppRepo({ first }),
  };
}

function job(app: App, over: Partial<DeployJob> = {}): DeployJob {
  return {
    deploymentId: randomUUID(),
    applicationId: app.id,
    applicationName: app.base,
    source: { repository: app.repo.path, ref: "main", credential: undefined, allowLocalSources: true },
    build: { $case: "dockerfile", dockerfile: { dockerfile: "Dockerfile", context: "." } },
    containerPort: 8080,
    healthCheckPath: "/",
    healthCheckTimeoutSeconds: 30,
    env: {},
    fqdns: [app.fqdn],
    containerBaseName: app.base,
    deadlineUnixMs: Date.now() + 180_000,
    keepImages: [],
    limits: undefined,
    ...over,
  };
}

const builtImages = new Set<string>();

const report = (r: Awaited<ReturnType<Deployer["run"]>>) => {
  if (r.detail?.$case !== "deploy") throw new Error(`no DeployReport: ${JSON.stringify(r)}`);
  if (r.detail.deploy.image) builtImages.add(r.detail.deploy.image);
  return r.detail.deploy;
};

/** The retire's progress lines of an operation, joined. */
const retireLog = (opId: string) =>
  progress
    .filter((p) => p.operationId === opId && p.progress?.deploy.step === "retire")
    .map((p) => p.progress!.deploy.log)
    .join("");

const exists = (name: string) =>
  podman(["container", "exists", name]).then(
    () => true,
    () => false,
  );

const retireEnded = (opId: string) =>
  progress.find(
    (p) =>
      p.operationId === opId &&
      p.progress?.deploy.step === "retire" &&
      p.progress.deploy.status !== DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING,
  )?.progress?.deploy.status;

test.serial(
  "deploy queue - a deployment waiting for its application's turn logs it with times, and starts at the result",
  async (t) => {
    const app = await makeApp("1");
    const [j1, j2] = [job(app), job(app)];
    const [op1, op2] = [randomUUID(), randomUUID()];
    const [r1, r2] = await Promise.all([deployer.run(op1, j1), deployer.run(op2, j2)]);
    t.is(r1.status, JobStatus.JOB_STATUS_COMPLETED, r1.stderr);
    t.is(r2.status, JobStatus.JOB_STATUS_COMPLETED, r2.stderr);
    const [d1, d2] = [report(r1), report(r2)];
    t.is(d1.steps[0]?.name, "fetch", "the first did not wait");
    const queue = d2.steps[0]!;
    t.is(queue.name, "queue");
    t.is(queue.status, DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED);
    t.regex(
      queue.log,
      new RegExp(
        `^${ISO} waiting for deployment ${j1.deploymentId} to finish\n${ISO} deployment ${j1.deploymentId} finished; waited \\d+\\.\\d s\n$`,
      ),
    );
    t.deepEqual(
      d2.steps.slice(1).map((s) => s.name),
      ["fetch", "build", "start", "health_check", "switch", "retire"],
    );
    // The turn passed at the first's switch, long before its retire (which has nothing to drain here,
    // so the second's retire is the one that drains the first's container).
    const switched = Number(d1.steps.find((s) => s.name === "switch")!.endedAtUnixMs);
    t.true(Number(queue.endedAtUnixMs) >= switched);
    t.is(d2.previousContainerName, d1.containerName);
    t.is((await proxyGet(caddy.httpPort, app.fqdn)).body, "version 1");
    t.true(await exists(d1.containerName), "the old container drains");
    await deployer.idle();
    t.is(retireEnded(op2), DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED, retireLog(op2));
    t.regex(retireLog(op2), new RegExp(`${ISO} removed ${d1.containerName}`));
    t.false(await exists(d1.containerName));
  },
);

test.serial("retire - an old container already gone when the drain ends is no failure", async (t) => {
  const app = await makeApp("1");
  const first = report(await deployer.run(randomUUID(), job(app)));
  await app.repo.commitVersion("2");
  const opId = randomUUID();
  const second = report(await deployer.run(opId, job(app)));
  t.is(second.failedStep, "");
  // Someone removes the old one by hand while it drains.
  await podman(["rm", "-f", "-t", "0", first.containerName]);
  await pollUntil(() => retireEnded(opId), { what: "the end of the retire", timeoutMs: 120_000 });
  t.is(retireEnded(opId), DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED, retireLog(opId));
  t.regex(retireLog(opId), /the old containers were already gone/);
  t.is((await proxyGet(caddy.httpPort, app.fqdn)).body, "version 2");
});

/** A CGI that writes the whole answer itself, status line included (busybox httpd sends it as is). */
async function commitRawAnswers(app: App): Promise<void> {
  const answers: Record<string, string> = {
    "lf-only": "HTTP/1.1 200 OK\\nContent-Type: text/plain\\nContent-Length: 2\\n\\nok",
    "http10-lf": "HTTP/1.0 200\\n\\nok",
    "http10-crlf": "HTTP/1.0 200 OK\\r\\nContent-Type: text/plain\\r\\n\\r\\nok",
  };
  for (const [name, answer] of Object.entries(answers)) {
    const file = join(app.repo.path, "www", "cgi-bin", name);
    writeFileSync(file, `#!/bin/sh\nprintf '${answer}'\n`);
    chmodSync(file, 0o755);
  }
  await app.repo.git(["add", "-A"]);
  await app.repo.git(["commit", "-q", "-m", "raw answers"]);
}

test.serial(
  "deploy health check - LF-only lines, HTTP/1.0 and no reason phrase are healthy, as curl takes them",
  async (t) => {
    const app = await makeApp("raw");
    await commitRawAnswers(app);
    for (const path of ["/cgi-bin/lf-only", "/cgi-bin/http10-lf", "/cgi-bin/http10-crlf"]) {
      const r = await deployer.run(randomUUID(), job(app, { healthCheckPath: path }));
      t.is(r.status, JobStatus.JOB_STATUS_COMPLETED, `${path}: ${r.stderr}`);
      const log = report(r).steps.find((s) => s.name === "health_check")?.log ?? "";
      t.regex(log, /answered 200/, path);
    }
    t.is((await proxyGet(caddy.httpPort, app.fqdn)).body, "version raw");
  },
);

// The agent's deployment pipeline in-process (agent/src/deploy), against a real
// podman, a real Caddy and real git repositories on local paths: what the
// control plane sees of a deployment (the JobResult, its DeployReport and the
// JobProgress stream) and what a client of the application sees through Caddy.
// Images are built FROM the harness's busybox image, so a build is one COPY.
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type DeployJob,
  type DeployReport,
  DeployStepStatus,
  type JobProgress,
  type JobResult,
  JobStatus,
} from "@relayctl/proto";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman, podmanAgentEnv, removeAppContainers } from "./harness/containers";
import { startGitHttp } from "./harness/git-http";
import { AUTHOR, type AppRepo, createAppRepo } from "./harness/git-repo";
import { type PipelineStack, startPipelineStack } from "./harness/pipeline-stack";
import { startRegistry } from "./harness/registry";
import { proxyGet } from "./harness/proxy-client";
import { startTraffic } from "./harness/traffic";
import { pollUntil } from "./harness/wait";

const DRAIN_SECONDS = 3;
const SECRET = `env-secret-${randomUUID()}`;

// The engine CLI the pipeline runs inherits this process's environment.
process.env.CONTAINERS_CONF = podmanAgentEnv.CONTAINERS_CONF;

test.after.always(cleanupAll);

let stack: Promise<PipelineStack> | undefined;
const builtImages = new Set<string>();

function startStack(): Promise<PipelineStack> {
  stack ??= startPipelineStack({ drainSeconds: DRAIN_SECONDS });
  return stack;
}

interface App {
  id: string;
  fqdn: string;
  base: string;
  repo: AppRepo;
}

/** An application whose repository's first commit (on main) serves `version <first>`. */
async function makeApp(first = "1"): Promise<App> {
  const id = randomUUID();
  const suffix = id.slice(0, 6);
  onCleanup(async () => {
    await removeAppContainers(id);
    // By the tags the deployments reported: listing images races other users of the machine's podman.
    for (const image of builtImages)
      if (image.includes(id)) await podman(["image", "rm", "-f", image]).catch(() => undefined);
  });
  return {
    id,
    fqdn: `app-${suffix}.example.test`,
    base: `deptest-${suffix}`,
    repo: await createAppRepo({ first }),
  };
}

function job(app: App, ref: string, over: Partial<DeployJob> = {}): DeployJob {
  return {
    deploymentId: randomUUID(),
    applicationId: app.id,
    applicationName: app.base,
    source: { repository: app.repo.path, ref, credential: undefined, allowLocalSources: true },
    build: { $case: "dockerfile", dockerfile: { dockerfile: "Dockerfile", context: "." } },
    containerPort: 8080,
    healthCheckPath: "/",
    healthCheckTimeoutSeconds: 20,
    env: {},
    fqdns: [app.fqdn],
    containerBaseName: app.base,
    deadlineUnixMs: Date.now() + 90_000,
    keepImages: [],
    limits: undefined,
    ...over,
  };
}

async function deploy(j: DeployJob): Promise<{ result: JobResult; report: DeployReport; opId: string }> {
  const { deployer } = await startStack();
  const opId = randomUUID();
  const result = await deployer.run(opId, j);
  if (result.detail?.$case !== "deploy") throw new Error(`no DeployReport: ${JSON.stringify(result)}`);
  if (result.detail.deploy.image) builtImages.add(result.detail.deploy.image);
  return { result, report: result.detail.deploy, opId };
}

async function through(app: App, path = "/"): Promise<string> {
  const { caddy } = await startStack();
  const res = await proxyGet(caddy.httpPort, app.fqdn, path);
  return `${res.status} ${res.body}`;
}

const exists = (name: string) =>
  podman(["container", "exists", name]).then(
    () => true,
    () => false,
  );

function progressOf(opId: string, progress: JobProgress[]) {
  return progress.filter((p) => p.operationId === opId);
}

test.serial(
  "deploy pipeline - a first deploy serves through Caddy; a second switches and retires the old after the drain",
  async (t) => {
    const { progress, caddy } = await startStack();
    const app = await makeApp("1");
    const sha1 = app.repo.head().sha;
    const first = await deploy(job(app, "main"));
    t.is(first.result.status, JobStatus.JOB_STATUS_COMPLETED, first.result.stderr);
    t.is(first.result.exitCode, 0);
    t.is(first.report.commit?.sha, sha1);
    t.is(first.report.commit?.message, "Release 1");
    t.is(first.report.commit?.author, `${AUTHOR.name} <${AUTHOR.email}>`);
    t.regex(first.report.image, new RegExp(`^relayctl/${app.id}:${sha1.slice(0, 12)}-[0-9a-f]{12}$`));
    t.is(
      first.report.containerName,
      `${app.base}-${first.report.deploymentId.replace(/-/g, "").slice(0, 8)}`,
    );
    t.is(first.report.upstream, `127.0.0.1:${first.report.hostPort}`);
    t.deepEqual(
      first.report.steps.map((s) => [s.name, s.status]),
      [
        ["fetch", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
        ["build", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
        ["start", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
        ["health_check", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
        ["switch", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
        ["retire", DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING],
      ],
    );
    t.is(await through(app), "200 version 1");
    const seqs = progressOf(first.opId, progress).map((p) => p.seq);
    t.deepEqual(
      seqs,
      seqs.map((_, i) => i + 1),
      "seq is 1, 2, 3... per operation",
    );
    // The build's output went out while it ran, before the step ended.
    const build = progressOf(first.opId, progress).filter((p) => p.progress?.deploy.step === "build");
    const live = build.filter(
      (p) =>
        p.progress?.deploy.status === DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING &&
        /STEP \d/.test(p.progress.deploy.log),
    );
    t.true(live.length > 0, "build output streamed as progress");

    // The second version comes from a tag.
    const sha2 = (await app.repo.commitVersion("2")).sha;
    await app.repo.tag("v2");
    await app.repo.git(["reset", "-q", "--hard", sha1]); // main stays at 1: only the tag names 2
    // A client sends requests the whole time: the switch and the retire must fail none of them.
    const traffic = startTraffic(caddy.httpPort, app.fqdn);
    const second = await deploy(job(app, "v2"));
    t.is(second.result.status, JobStatus.JOB_STATUS_COMPLETED, second.result.stderr);
    t.is(second.report.commit?.sha, sha2);
    t.is(second.report.previousContainerName, first.report.containerName);
    t.is(await through(app), "200 version 2", "traffic moved at the switch");
    t.true(await exists(first.report.containerName), "the old container drains before it goes");
    // Progress reports the end of retire; the old container is gone by then.
    await pollUntil(
      () =>
        progressOf(second.opId, progress).find(
          (p) =>
            p.progress?.deploy.step === "retire" &&
            p.progress.deploy.status === DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED,
        ),
      { what: "the end of retire", timeoutMs: 30_000 },
    );
    t.false(await exists(first.report.containerName), "the old container is retired");
    const seen = await traffic.stop();
    t.deepEqual(
      seen.failures,
      [],
      `${seen.failed} of ${seen.total} requests failed across the switch and the retire`,
    );
    t.deepEqual(seen.sequence, ["version 1", "version 2"], "served 1, then 2");
    t.true(await exists(second.report.containerName));
    t.is(await through(app), "200 version 2");
    // The previous image is kept for a rollback.
    await t.notThrowsAsync(podman(["image", "exists", first.report.image]));

    // A third version: the newest image before it stays, older built ones go.
    await app.repo.commitVersion("3");
    const third = await deploy(job(app, "main"));
    t.is(third.result.status, JobStatus.JOB_STATUS_COMPLETED, third.result.stderr);
    t.is(await through(app), "200 version 3");
    await startStack().then((s) => s.deployer.idle()); // retire (and the image cleanup) ended
    t.false(await exists(second.report.containerName));
    const image = (ref: string) =>
      podman(["image", "exists", ref]).then(
        () => true,
        () => false,
      );
    t.false(await image(first.report.image), "the oldest image is removed");
    t.true(await image(second.report.image), "the previous image stays for a rollback");
    t.true(await image(third.report.image));
  },
);

test.serial(
  "deploy pipeline - an unhealthy version fails at health_check; the old keeps serving, the new is removed",
  async (t) => {
    const app = await makeApp("good");
    const good = await deploy(job(app, "main"));
    t.is(good.result.status, JobStatus.JOB_STATUS_COMPLETED, good.result.stderr);
    // Never listens: a commit on another branch, deployed by its SHA.
    await app.repo.git(["checkout", "-q", "-b", "broken"]);
    const bad = (await app.repo.commitBroken("bad")).sha;
    await app.repo.git(["checkout", "-q", app.repo.branch]);
    const failed = await deploy(job(app, bad, { healthCheckTimeoutSeconds: 2 }));
    t.is(failed.result.status, JobStatus.JOB_STATUS_FAILED);
    t.is(failed.result.exitCode, 1);
    t.regex(failed.result.stderr, /^health_check: no 2xx or 3xx answer/);
    t.is(failed.result.error, failed.result.stderr);
    t.is(failed.report.failedStep, "health_check");
    t.is(failed.report.commit?.sha, bad);
    t.false(await exists(failed.report.containerName), "the new container is removed");
    const { progress } = await startStack();
    const last = progressOf(failed.opId, progress).at(-1)?.progress?.deploy;
    t.is(last?.status, DeployStepStatus.DEPLOY_STEP_STATUS_FAILED, "nothing is reported after the failure");
    t.regex(last?.log ?? "", /removed the new container/);
    t.true(await exists(good.report.containerName), "the old container is intact");
    t.is(await through(app), "200 version good");
  },
);

test.serial("deploy pipeline - the health check takes a 3xx answer as healthy, a 404 as not", async (t) => {
  const app = await makeApp("redirect");
  // busybox httpd answers a directory asked for without its slash with a 302 to the slash.
  const redirected = await deploy(job(app, "main", { healthCheckPath: "/cgi-bin" }));
  t.is(redirected.result.status, JobStatus.JOB_STATUS_COMPLETED, redirected.result.stderr);
  t.regex(redirected.report.steps.find((s) => s.name === "health_check")?.log ?? "", /answered 302/);
  const missing = await deploy(
    job(app, "main", { healthCheckPath: "/no-such-page", healthCheckTimeoutSeconds: 2 }),
  );
  t.is(missing.result.status, JobStatus.JOB_STATUS_FAILED);
  t.regex(
    missing.result.stderr,
    /^health_check: no 2xx or 3xx answer from \/no-such-page within 2 s \(last: answered 404\)/,
  );
  t.false(await exists(missing.report.containerName));
  t.is(await through(app), "200 version redirect");
});

test.serial(
  "deploy pipeline - the deadline gives TIMEOUT, removes the new container and leaves the old serving",
  async (t) => {
    const app = await makeApp("good");
    const good = await deploy(job(app, "main"));
    t.is(good.result.status, JobStatus.JOB_STATUS_COMPLETED, good.result.stderr);
    await app.repo.commitBroken("slow");
    const deadline = Date.now() + 20_000;
    const late = await deploy(job(app, "main", { deadlineUnixMs: deadline, healthCheckTimeoutSeconds: 60 }));
    const ended = Date.now();
    t.is(late.result.status, JobStatus.JOB_STATUS_TIMEOUT);
    t.is(late.result.exitCode, -1);
    const took = late.report.steps.map(
      (s) => `${s.name} ${Number(s.endedAtUnixMs) - Number(s.startedAtUnixMs)} ms`,
    );
    t.is(late.result.stderr, "deadline passed during health_check", took.join(", "));
    t.is(late.report.failedStep, "health_check");
    t.true(ended >= deadline, "not before the deadline");
    t.true(
      ended < deadline + 10_000,
      `cleanup ends a few seconds past the deadline (${ended - deadline} ms)`,
    );
    t.false(await exists(late.report.containerName));
    const { progress } = await startStack();
    t.is(
      progressOf(late.opId, progress).at(-1)?.progress?.deploy.status,
      DeployStepStatus.DEPLOY_STEP_STATUS_FAILED,
    );
    t.true(await exists(good.report.containerName));
    t.is(await through(app), "200 version good");
  },
);

test.serial(
  "deploy pipeline - env values reach the container and nothing else: no progress, argv or report",
  async (t) => {
    const { progress } = await startStack();
    const app = await makeApp("env");
    // An application variable named PATH must not change which engine binary runs.
    const env = { APP_SECRET: SECRET, PATH: "/bin:/nonexistent-app-path" };
    const d = await deploy(job(app, "main", { env }));
    t.is(d.result.status, JobStatus.JOB_STATUS_COMPLETED, d.result.stderr);
    t.is(await through(app, "/cgi-bin/env?APP_SECRET"), `200 ${SECRET}`);
    t.is(await through(app, "/cgi-bin/env?PATH"), "200 /bin:/nonexistent-app-path");
    const [inspect] = JSON.parse((await podman(["container", "inspect", d.report.containerName])).stdout);
    const argv = JSON.stringify([inspect.Config.CreateCommand, inspect.Args, inspect.Path]);
    // The env reaches the container through an env file only (issue 30, finding 13): no name, no value.
    t.true(argv.includes("--env-file"), argv);
    t.false(argv.includes("APP_SECRET"), "not even the name is on argv");
    t.false(argv.includes(SECRET), "the value is not");
    t.false(JSON.stringify(progressOf(d.opId, progress)).includes(SECRET));
    t.false(JSON.stringify(d.result).includes(SECRET));
  },
);

test.serial("deploy pipeline - a container that exits fails fast with its scrubbed log tail", async (t) => {
  const { progress } = await startStack();
  const app = await makeApp();
  await app.repo.commitCommand("crash", ["sh", "-c", 'echo "boom $APP_SECRET"; exit 3']);
  const d = await deploy(job(app, "main", { env: { APP_SECRET: SECRET }, healthCheckTimeoutSeconds: 60 }));
  t.is(d.result.status, JobStatus.JOB_STATUS_FAILED);
  t.regex(d.result.stderr, /^health_check: the container stopped/);
  const log = d.report.steps.find((s) => s.name === "health_check")?.log ?? "";
  t.regex(log, /boom \*\*\*/, "the tail of its log, scrubbed");
  t.false(JSON.stringify(progressOf(d.opId, progress)).includes(SECRET));
  t.false(await exists(d.report.containerName));
});

test.serial(
  "deploy pipeline - git refs: a name that is no branch, tag or SHA fails at fetch; paths must stay inside",
  async (t) => {
    const app = await makeApp();
    const missing = await deploy(job(app, "no-such-branch"));
    t.is(missing.result.status, JobStatus.JOB_STATUS_FAILED);
    t.regex(missing.result.stderr, /^fetch: ref 'no-such-branch' is no branch, tag or commit/);
    const outside = await deploy(
      job(app, "main", {
        build: { $case: "dockerfile", dockerfile: { dockerfile: "../../etc/passwd", context: "." } },
      }),
    );
    t.is(outside.result.status, JobStatus.JOB_STATUS_FAILED);
    t.regex(
      outside.result.stderr,
      /^build: dockerfile '..\/..\/etc\/passwd' is not a file inside the repository/,
    );
  },
);

test.serial(
  "deploy pipeline - a private repository over HTTP: the credential goes through askpass and is stored nowhere",
  async (t) => {
    const { progress, stateDir } = await startStack();
    const app = await makeApp("private");
    const sha = app.repo.head().sha;
    const root = makeTempDir("git-http");
    await app.repo.git(["clone", "-q", "--bare", app.repo.path, join(root, "app.git")]);
    const password = `git-pass-${randomUUID()}`;
    const server = await startGitHttp(root, "deployer", password);
    const source = (pw: string) => ({
      repository: server.url("app.git"),
      ref: "main",
      credential: { username: "deployer", password: pw },
      allowLocalSources: true,
    });

    const wrong = await deploy(job(app, "main", { source: source(`${password}-wrong`) }));
    t.is(wrong.result.status, JobStatus.JOB_STATUS_FAILED);
    t.regex(wrong.result.stderr, /^fetch: git fetch exited with code 128/);
    t.false(JSON.stringify([wrong.result, progressOf(wrong.opId, progress)]).includes(`${password}-wrong`));

    const d = await deploy(job(app, "main", { source: source(password) }));
    t.is(d.result.status, JobStatus.JOB_STATUS_COMPLETED, d.result.stderr);
    t.is(d.report.commit?.sha, sha);
    t.true(
      server.requests.some((r) => r.authorized),
      "git sent the credential when asked",
    );
    t.is(await through(app), "200 version private");
    const cache = join(stateDir, "deploy", app.id);
    const config = readFileSync(join(cache, "config"), "utf8");
    t.false(config.includes(password), "no credential in the cache repository's config");
    t.false(config.includes("[remote"), "no remote stored: fetched by URL each time");
    t.false(JSON.stringify([d.result, progressOf(d.opId, progress)]).includes(password));
  },
);

test.serial(
  "deploy pipeline - an image build pulls from a private registry through a temporary auth file",
  async (t) => {
    const { progress } = await startStack();
    const app = await makeApp("pulled");
    const password = `registry-pass-${randomUUID()}`;
    const registry = await startRegistry("puller", password);
    // Every podman of this process (the pipeline's included) may talk plain HTTP to it.
    process.env.CONTAINERS_REGISTRIES_CONF = registry.registriesConf;
    const image = `${registry.host}/team/app-${app.id.slice(0, 8)}:1`;
    await podman(["build", "-q", "-t", image, app.repo.path]);
    const authDir = makeTempDir("push-auth");
    const authfile = join(authDir, "auth.json");
    await new Promise<void>((resolve, reject) => {
      const child = execFile(
        "podman",
        ["login", "--authfile", authfile, "-u", "puller", "--password-stdin", registry.host],
        { env: process.env },
        (err) => (err ? reject(err) : resolve()),
      );
      child.stdin?.end(password);
    });
    await podman(["push", "-q", "--authfile", authfile, image]);
    await podman(["image", "rm", image]); // the deployment must pull it
    builtImages.add(image);

    const authDirs = () =>
      ["/dev/shm", tmpdir()].flatMap((d) => readdirSync(d).filter((f) => f.startsWith("relayctl-auth-")));
    const before = authDirs();
    const d = await deploy(
      job(app, "", {
        source: undefined,
        build: {
          $case: "image",
          image: { image, auth: { registry: registry.host, username: "puller", password } },
        },
      }),
    );
    t.is(d.result.status, JobStatus.JOB_STATUS_COMPLETED, d.result.stderr);
    t.is(d.report.image, image);
    t.is(d.report.commit, undefined);
    t.deepEqual(
      d.report.steps.slice(0, 2).map((s) => [s.name, s.status]),
      [
        ["fetch", DeployStepStatus.DEPLOY_STEP_STATUS_SKIPPED],
        ["build", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
      ],
    );
    t.is(await through(app), "200 version pulled");
    t.false(JSON.stringify([d.result, progressOf(d.opId, progress)]).includes(password));
    // Other files' agents pull and log in beside this one, in the same /dev/shm: a dir of theirs
    // goes when their call ends, one this deploy left would stay. Nothing new may be left.
    const left = await pollUntil(
      () => {
        const now = authDirs().filter((d) => !before.includes(d));
        return now.length === 0 ? now : undefined;
      },
      {
        what: "no temporary auth dir left by the deploy (relayctl-auth-*)",
        timeoutMs: 60_000,
        intervalMs: 200,
      },
    );
    t.deepEqual(left, [], "the temporary auth dir is gone");
    // The engine's own login was not touched: the credential lived in the temporary file only.
    const own = await podman(["login", "--get-login", registry.host]).then(
      (o) => o.stdout,
      () => "not logged in",
    );
    t.is(own, "not logged in");
  },
);

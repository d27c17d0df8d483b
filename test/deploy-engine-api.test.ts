// The deployment's run, inspect, list, remove and image id through the engine's API socket (a
// real `podman system service`, seen through the harness's relay) when the
// engine serves one (agent/src/engine/api-engine.ts): the container is created
// and started by the API with what the CLI's run would set (env, labels, port on
// 127.0.0.1, --init, restart policy, memory limit), serves through Caddy, and the
// retire removes the old one by the API (the containers before the start listed by
// the API too, with the application's label). Without a socket the CLI runs it.
// (podman's CLI goes to CONTAINER_HOST too, through its own /v<version>/libpod/
// paths: the compatible paths counted here are the agent's.) The health check probes on while
// the engine is slow to say whether the container runs.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import http from "node:http";
import { join } from "node:path";
import { type DeployJob, type DeployReport, JobStatus } from "@relayctl/proto";
import test from "ava";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman, podmanAgentEnv, removeAppContainers } from "./harness/containers";
import { EngineRelay } from "./harness/engine-relay";
import { createAppRepo } from "./harness/git-repo";
import { type PipelineStack, startPipelineStack } from "./harness/pipeline-stack";
import { proxyGet } from "./harness/proxy-client";
import { pollUntil } from "./harness/wait";

let stack: PipelineStack;
let relay: EngineRelay;

test.before(async () => {
  // The service and the CLI (the fallback) read the same containers.conf.
  Object.assign(process.env, podmanAgentEnv);
  const socketPath = join(makeTempDir("podman-api"), "podman.sock");
  const service = spawn("podman", ["system", "service", "--time=0", `unix://${socketPath}`], {
    env: process.env,
    stdio: "ignore",
  });
  onCleanup(async () => {
    service.kill("SIGTERM");
  });
  const ping = () =>
    new Promise<true | undefined>((resolve) => {
      const req = http.get({ socketPath, path: "/_ping", agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode === 200 ? true : undefined));
      });
      req.on("error", () => resolve(undefined));
    });
  await pollUntil(ping, { what: `podman system service on ${socketPath}`, timeoutMs: 15_000 });
  relay = new EngineRelay(socketPath);
  await relay.listen();
  stack = await startPipelineStack({ drainSeconds: 1 });
  // Its keep-alive connections to the relay would hold the relay's close.
  onCleanup(async () => stack.deployer.close());
});
test.after.always(cleanupAll);

function app() {
  const id = randomUUID();
  const suffix = id.slice(0, 6);
  onCleanup(() => removeAppContainers(id));
  return { id, suffix, fqdn: `api-${suffix}.example.test` };
}

function jobOf(a: ReturnType<typeof app>, repoPath: string): DeployJob {
  return {
    deploymentId: randomUUID(),
    applicationId: a.id,
    applicationName: `api-${a.suffix}`,
    source: { repository: repoPath, ref: "main", credential: undefined, allowLocalSources: true },
    build: { $case: "dockerfile", dockerfile: { dockerfile: "Dockerfile", context: "." } },
    containerPort: 8080,
    healthCheckPath: "/",
    healthCheckTimeoutSeconds: 20,
    env: {},
    fqdns: [a.fqdn],
    containerBaseName: `api-${a.suffix}`,
    deadlineUnixMs: Date.now() + 90_000,
    keepImages: [],
    limits: undefined,
  };
}

async function deploy(a: ReturnType<typeof app>, repoPath: string, over: Partial<DeployJob> = {}) {
  const result = await stack.deployer.run(randomUUID(), { ...jobOf(a, repoPath), ...over });
  if (result.detail?.$case !== "deploy") throw new Error(`no DeployReport: ${JSON.stringify(result)}`);
  if (result.status !== JobStatus.JOB_STATUS_COMPLETED) throw new Error(`deploy failed: ${result.stderr}`);
  const report: DeployReport = result.detail.deploy;
  // A rollback runs a release's image by its id, which every tag of an identical build shares
  // (other files build the same "version 1"): only a build's own tag is removed.
  if (report.image.startsWith("sha256:")) return report;
  onCleanup(() =>
    podman(["image", "rm", "-f", report.image]).then(
      () => undefined,
      () => undefined,
    ),
  );
  return report;
}

/** The relay's last requests, for a failed count's message. */
const lastRequests = () => `; the relay's last requests: ${relay.requests.slice(-8).join(", ")}`;

const inspectField = async (name: string, format: string) =>
  (await podman(["container", "inspect", "--format", format, name])).stdout.trim();

test.serial(
  "deploy engine api - run, inspect and remove go through the socket with the run's settings",
  async (t) => {
    process.env.CONTAINER_HOST = `unix://${relay.path}`;
    const a = app();
    const repo = await createAppRepo({ first: "1" });
    const secret = `value with spaces ${randomUUID()}`;
    const limits = { memoryBytes: 64 * 1024 * 1024, cpuMillis: 500 };
    const first = await deploy(a, repo.path, { env: { APP_SECRET: secret }, limits });
    const name = first.containerName;
    t.is(
      relay.count(new RegExp(`^POST /containers/create\\?name=${name}$`)),
      1,
      `created by the API${lastRequests()}`,
    );
    t.is(relay.count(/^POST \/containers\/[0-9a-f]{64}\/start$/), 1, `started by the API${lastRequests()}`);
    t.true(relay.count(new RegExp(`^GET /containers/${name}/json$`)) >= 1, "its port read by the API");
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version 1");
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn, "/cgi-bin/env?APP_SECRET")).body, secret);
    t.is(await inspectField(name, "{{.HostConfig.Init}}"), "true");
    t.is(await inspectField(name, "{{.HostConfig.RestartPolicy.Name}}"), "unless-stopped");
    t.is(await inspectField(name, "{{.HostConfig.Memory}}"), String(limits.memoryBytes));
    t.is(await inspectField(name, "{{.HostConfig.NanoCpus}}"), "500000000");
    t.is(await inspectField(name, '{{index .Config.Labels "relayctl.application"}}'), a.id);
    t.regex(
      await inspectField(name, "{{json .NetworkSettings.Ports}}"),
      /"8080\/tcp":\[\{"HostIp":"127\.0\.0\.1"/,
    );

    // The next deployment's retire removes the old container by the API.
    await repo.commitVersion("2");
    const listed = relay.count(/^GET \/containers\/json\?all=true&filters=/);
    const second = await deploy(a, repo.path);
    t.is(
      relay.count(/^GET \/containers\/json\?all=true&filters=/),
      listed + 1,
      `listed by the API${lastRequests()}`,
    );
    t.is(second.previousContainerName, name, "the list found the old container");
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version 2");
    await pollUntil(
      () => (relay.count(new RegExp(`^DELETE /containers/${name}\\?force=true$`)) > 0 ? true : undefined),
      {
        what: "the retire's DELETE of the old container",
        // After the drain, a stop through the CLI: podman's locks are shared with every test file running.
        timeoutMs: 90_000,
      },
    );
    t.true(
      await pollUntil(
        () =>
          podman(["container", "exists", name]).then(
            () => undefined,
            () => true,
          ),
        { what: "the old container gone", timeoutMs: 90_000 },
      ),
      "the old container is gone from the engine",
    );
  },
);

test.serial(
  "deploy engine api - an engine slower than the health check's timeout does not fail an app that answers within it",
  async (t) => {
    process.env.CONTAINER_HOST = `unix://${relay.path}`;
    const a = app();
    const repo = await createAppRepo({ first: "1" });
    // Answers 2 s after it starts; the health check gives it 6 s.
    await repo.commitCommand("slow", ["sh", "-c", "sleep 2; exec httpd -f -p 8080 -h /www"]);
    // The engine takes 10 s to answer whether the container still runs (the start's own
    // inspect, the first, answers at once): a probe loop that waited for that answer would
    // send no probe between 0 s and 10 s, and fail the app at its timeout.
    const inspects = new RegExp(`^GET /containers/api-${a.suffix}-[0-9a-f]{8}/json$`);
    relay.slow(inspects, 10_000, 1);
    try {
      const report = await deploy(a, repo.path, { healthCheckTimeoutSeconds: 6 });
      t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version slow", report.containerName);
      t.true(relay.count(inspects) >= 2, `the engine was asked beside the probes${lastRequests()}`);
    } finally {
      relay.fast();
    }
  },
);

test.serial(
  "deploy engine api - a rollback asks the API whether its release's image is still here; a gone one fails clearly",
  async (t) => {
    process.env.CONTAINER_HOST = `unix://${relay.path}`;
    const a = app();
    const repo = await createAppRepo({ first: "1" });
    const first = await deploy(a, repo.path);
    await repo.commitVersion("2");
    await deploy(a, repo.path, { keepImages: [first.imageId] });
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version 2");
    const asks = (id: string) => relay.count(new RegExp(`^GET /images/${id}/json$`));
    const release = (image: string) => ({
      source: undefined,
      build: { $case: "release" as const, release: { image, deploymentId: randomUUID() } },
    });
    await deploy(a, repo.path, release(first.imageId));
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version 1", "the rollback serves release 1");
    t.is(asks(first.imageId), 1, `its image asked of the API, not the CLI${lastRequests()}`);

    const gone = `sha256:${"0".repeat(64)}`;
    const result = await stack.deployer.run(randomUUID(), { ...jobOf(a, repo.path), ...release(gone) });
    t.is(result.status, JobStatus.JOB_STATUS_FAILED);
    t.regex(result.stderr, /is no longer on this server/);
    t.is(asks(gone), 1, `asked of the API: its 404 is the answer${lastRequests()}`);
    t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version 1", "release 1 still serves");
  },
);

test.serial("deploy engine api - without a socket that answers, the CLI runs the container", async (t) => {
  // The default socket (root: /run/podman/podman.sock) is not there; the CLI itself is local again.
  Reflect.deleteProperty(process.env, "CONTAINER_HOST");
  // Whatever the first test left running (a retire whose engine was chosen with the socket, when
  // that test failed before waiting for it) ends first: only this deployment's calls are counted.
  await stack.deployer.idle();
  // The agent's own calls (compatible paths); the first test's retire may still run podman's CLI through it.
  const agentCalls = () => relay.count(/^[A-Z]+ \/containers\//);
  const seen = agentCalls();
  const a = app();
  const repo = await createAppRepo({ first: "cli" });
  const report = await deploy(a, repo.path, { env: { APP_SECRET: "via the env file" } });
  t.is((await proxyGet(stack.caddy.httpPort, a.fqdn)).body, "version cli");
  t.is((await proxyGet(stack.caddy.httpPort, a.fqdn, "/cgi-bin/env?APP_SECRET")).body, "via the env file");
  t.is(await inspectField(report.containerName, "{{.HostConfig.Init}}"), "true");
  t.is(
    agentCalls(),
    seen,
    `the agent asked the relay nothing; it asked: ${relay.requests.slice(-5).join(", ")}`,
  );
});

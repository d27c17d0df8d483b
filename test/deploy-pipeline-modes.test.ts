// The deployment pipeline's switch in the agent's other settings, in-process
// against a real podman: without a reverse proxy (make dev) the deployment
// completes and says where the new version listens; in container-network
// upstream mode the container joins RELAYCTL_AGENT_DEPLOY_NETWORK and the route
// names it by container name and container port. With the engine setting
// `docker` the same pipeline drives the `docker` CLI.
import { randomUUID } from "node:crypto";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { delimiter, join } from "node:path";
import { type DeployJob, type JobProgress, JobStatus } from "@relayctl/proto";
import test from "ava";
import type { ProxyConfig } from "../agent/src/config";
import { Deployer } from "../agent/src/deploy/deployer";
import { DockerEngine } from "../agent/src/engine/docker-engine";
import type { ContainerEngine } from "../agent/src/engine/engine";
import { PodmanEngine } from "../agent/src/engine/podman-engine";
import { selectEngine } from "../agent/src/engine/select";
import { RouteSyncRunner } from "../agent/src/jobs/route-sync";
import { startCaddy } from "./harness/caddy";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { podman, podmanAgentEnv, removeAppContainers, removeAppImages } from "./harness/containers";
import { createAppRepo } from "./harness/git-repo";

process.env.CONTAINERS_CONF = podmanAgentEnv.CONTAINERS_CONF;

test.after.always(cleanupAll);

function deployer(
  proxy: ProxyConfig,
  network?: string,
  engine: () => ContainerEngine = () => new PodmanEngine(),
) {
  const stateDir = makeTempDir("agent-state");
  const routes = new RouteSyncRunner(proxy, stateDir, "podman");
  const progress: JobProgress[] = [];
  const d = new Deployer({
    settings: { stateDir, drainSeconds: 0, network, init: true },
    target: { proxy, syncer: () => routes.syncer() },
    engine,
    emit: (p) => progress.push(p),
  });
  return { d, progress };
}

async function appJob(): Promise<DeployJob> {
  const applicationId = randomUUID();
  const base = `deptest-${applicationId.slice(0, 6)}`;
  onCleanup(() => removeAppContainers(applicationId));
  const repo = await createAppRepo({ first: "1" });
  onCleanup(() => removeAppImages(applicationId));
  return {
    deploymentId: randomUUID(),
    applicationId,
    applicationName: base,
    source: { repository: repo.path, ref: "main", credential: undefined, allowLocalSources: true },
    build: { $case: "dockerfile", dockerfile: { dockerfile: "Dockerfile", context: "." } },
    containerPort: 8080,
    healthCheckPath: "/index.html",
    healthCheckTimeoutSeconds: 20,
    env: {},
    fqdns: [`${base}.example.test`],
    containerBaseName: base,
    deadlineUnixMs: Date.now() + 90_000,
    keepImages: [],
    limits: undefined,
  };
}

function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", agent: false }, (res) => {
      let body = "";
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve(`${res.statusCode} ${body}`));
    });
    req.on("error", reject);
    req.end();
  });
}

test.serial(
  "deploy modes - without a proxy the deployment completes and says where the new version listens",
  async (t) => {
    const { d } = deployer({ kind: "none", upstream: "host" });
    const job = await appJob();
    const result = await d.run(randomUUID(), job);
    t.is(result.status, JobStatus.JOB_STATUS_COMPLETED, result.stderr);
    if (result.detail?.$case !== "deploy") return t.fail("no report");
    const report = result.detail.deploy;
    t.is(report.proxy, "none");
    t.is(report.upstream, "");
    const where = `127.0.0.1:${report.hostPort}`;
    t.regex(report.steps.find((s) => s.name === "switch")?.log ?? "", new RegExp(`listens on ${where}`));
    t.regex(result.stdout, new RegExp(`listening on ${where}`));
    t.is(await get(report.hostPort), "200 version 1");
    await d.idle();
  },
);

test.serial(
  "deploy modes - container-network: the container joins the network, the route names it",
  async (t) => {
    const network = `relayctl-deptest-${randomUUID().slice(0, 8)}`;
    await podman(["network", "create", network]);
    onCleanup(() => podman(["network", "rm", "-f", network]).then(() => undefined));
    const caddy = await startCaddy();
    const proxy: ProxyConfig = {
      kind: "caddy",
      upstream: "container-network",
      adminUrl: caddy.adminUrl,
      serverName: "relayctl",
      listen: [`127.0.0.1:${caddy.httpPort}`],
      automaticHttps: false,
    };
    const { d } = deployer(proxy, network);
    const job = await appJob();
    const result = await d.run(randomUUID(), job);
    t.is(result.status, JobStatus.JOB_STATUS_COMPLETED, result.stderr);
    if (result.detail?.$case !== "deploy") return t.fail("no report");
    const report = result.detail.deploy;
    t.is(report.upstream, `${report.containerName}:8080`);
    const [inspect] = JSON.parse((await podman(["container", "inspect", report.containerName])).stdout);
    t.true(Object.keys(inspect.NetworkSettings.Networks ?? {}).includes(network));
    const config = await caddy.admin("GET", "/config/apps/http/servers/relayctl/routes");
    t.true(config.text.includes(`"${report.containerName}:8080"`), config.text);
    t.is(await get(report.hostPort), "200 version 1", "still published for the health check");
    await d.idle();
  },
);

test.serial(
  "deploy modes - the engine setting docker runs the whole pipeline through the docker CLI",
  async (t) => {
    // No docker daemon runs here: podman's docker-compatible CLI stands in for `docker`
    // (as Debian's podman-docker does), and records that it was the one called.
    const bin = makeTempDir("docker-bin");
    const calls = join(bin, "calls");
    writeFileSync(join(bin, "docker"), `#!/bin/sh\necho "$1" >> '${calls}'\nexec podman "$@"\n`);
    chmodSync(join(bin, "docker"), 0o755);
    const path = `${bin}${delimiter}${process.env.PATH ?? ""}`;
    const engine = selectEngine("docker", path);
    t.true(engine instanceof DockerEngine);
    const saved = process.env.PATH;
    process.env.PATH = path; // the agent finds its engine binary on its own PATH
    try {
      const { d } = deployer({ kind: "none", upstream: "host" }, undefined, () => engine);
      const job = await appJob();
      const result = await d.run(randomUUID(), job);
      t.is(result.status, JobStatus.JOB_STATUS_COMPLETED, result.stderr);
      if (result.detail?.$case !== "deploy") return t.fail("no report");
      t.is(await get(result.detail.deploy.hostPort), "200 version 1");
      await d.idle();
      const called = readFileSync(calls, "utf8").split("\n");
      for (const sub of ["build", "run"]) t.true(called.includes(sub), `docker ${sub} was called`);
    } finally {
      process.env.PATH = saved;
    }
  },
);

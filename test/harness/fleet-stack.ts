// Several servers of one relayctl installation, each as a real server would be:
// its own agent, its own podman store (graphroot, runroot and tmp dir of its
// own, so one agent's retire never sees another's containers of the same
// application) and its own Caddy. Built on the deploy stack (the cluster's own
// first server is not part of a fleet). Issue 33.
//
// A store holds everything its builds use: the busybox base image is loaded
// into it from an archive of the machine's. It used to read the machine's store
// as an additional image store instead, and then a build could resolve to an
// image of that store (podman's layer cache: other test files build the same
// commits of the same test app) that another file's retention or cleanup
// removed meanwhile: CI saw a fleet server's release image vanish ("no longer on
// this server") and its next build fail with "layer not known".
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import type { ExecutionContext } from "ava";
import { Agent } from "./agent";
import { type CaddyServer, startCaddy } from "./caddy";
import { makeTempDir, onCleanup } from "./cleanup";
import { BASE_IMAGE, buildBaseImage, podman as machinePodman, podmanOn } from "./containers";
import type { DeployStack } from "./deploy-stack";
import { AGENT_MAIN, parseJsonOutput } from "./programs";
import { cleanEnv } from "./process";

export interface FleetServer {
  id: string;
  name: string;
  agent: Agent;
  caddy: CaddyServer;
  /** Where this server's Caddy serves the routed domains (send Host: <fqdn>). */
  proxyPort: number;
  /** Env that points podman at this server's store. */
  podmanEnv: Record<string, string>;
  /** podman on this server's store. */
  podman(args: string[]): Promise<{ stdout: string; stderr: string }>;
}

/** A podman store of its own in `dir`: storage.conf and containers.conf (runc, as containers.ts). */
function podmanStore(dir: string): Record<string, string> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "storage.conf"),
    `[storage]\ndriver = "overlay"\ngraphroot = "${dir}/graph"\nrunroot = "${dir}/run"\n`,
  );
  writeFileSync(
    join(dir, "containers.conf"),
    `[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\ntmp_dir = "${dir}/tmp"\n`,
  );
  return {
    CONTAINERS_STORAGE_CONF: join(dir, "storage.conf"),
    CONTAINERS_CONF: join(dir, "containers.conf"),
  };
}

let baseArchive: Promise<string> | undefined;

/** The base image as an archive, saved from the machine's store once per process. */
function baseImageArchive(): Promise<string> {
  baseArchive ??= (async () => {
    await buildBaseImage();
    const file = join(makeTempDir("base-image"), "base.tar");
    await machinePodman(["save", "-o", file, BASE_IMAGE]);
    return file;
  })();
  return baseArchive;
}

/** Loads the base image into a server's store (again, after a test replaced it there). */
export async function loadBaseImage(server: Pick<FleetServer, "podman">): Promise<void> {
  await server.podman(["load", "-q", "-i", await baseImageArchive()]);
}

/**
 * Replaces the server's base image with one whose httpd never answers, so a deployment of any
 * commit fails its health check there only; the good one is loaded again when the test ends.
 */
export async function breakBaseImage(t: ExecutionContext, server: FleetServer): Promise<void> {
  const ctx = makeTempDir("bad-base");
  writeFileSync(
    join(ctx, "Containerfile"),
    `FROM ${BASE_IMAGE}\nRUN rm /bin/httpd && printf "#!/bin/sh\\nexec sleep 2147483647\\n" > /bin/httpd && chmod +x /bin/httpd\n`,
  );
  await server.podman(["build", "-q", "-t", BASE_IMAGE, ctx]);
  t.teardown(() => loadBaseImage(server));
}

/**
 * Enrolls a server named `name` through `relayctl-agent enroll` (with its
 * --label flags) and starts its agent on a store and a Caddy of its own.
 */
export async function addFleetServer(
  s: DeployStack,
  name: string,
  labels: Record<string, string> = {},
): Promise<FleetServer> {
  const token = await s.c.admin(["create-join-token", "--tenant", s.tenantId, "--server-name", name]);
  const stateDir = join(s.c.dir, `agent-${name}`);
  const storeDir = makeTempDir(`podman-${name}`);
  const podmanEnv = podmanStore(storeDir);
  const podman = (args: string[]) => podmanOn(podmanEnv, args);
  await loadBaseImage({ podman });
  onCleanup(async () => {
    await podman(["rm", "-fa"]).catch(() => {});
    await podman(["rmi", "-af"]).catch(() => {});
    await podman(["system", "prune", "-f"]).catch(() => {});
    rmSync(storeDir, { recursive: true, force: true });
  });
  const labelArgs = Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
  const { stdout } = await run(
    process.execPath,
    [
      AGENT_MAIN,
      "enroll",
      "--url",
      s.c.baseUrl,
      "--token",
      String(token.join_token),
      "--state-dir",
      stateDir,
      ...labelArgs,
    ],
    { env: cleanEnv({ RELAYCTL_AGENT_STATE_DIR: stateDir }), timeoutMs: 30_000 },
  );
  const enrolled = parseJsonOutput(stdout, "agent enroll");
  const caddy = await startCaddy();
  const agent = new Agent(stateDir, s.c.dir, {
    RELAYCTL_AGENT_CONTAINER_ENGINE: "podman",
    RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: "1",
    RELAYCTL_AGENT_PROXY: "caddy",
    RELAYCTL_AGENT_CADDY_ADMIN_URL: caddy.adminUrl,
    RELAYCTL_AGENT_CADDY_LISTEN: `127.0.0.1:${caddy.httpPort}`,
    RELAYCTL_AGENT_CADDY_AUTO_HTTPS: "false",
    ...podmanEnv,
  });
  onCleanup(() => agent.stop());
  onCleanup(() => caddy.stop());
  await agent.start();
  return {
    id: String(enrolled.server_id),
    name: String(enrolled.server_name),
    agent,
    caddy,
    proxyPort: caddy.httpPort,
    podmanEnv,
    podman,
  };
}

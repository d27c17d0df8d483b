// Several servers of one relayctl installation, each as a real server would be:
// its own agent, its own podman store (graphroot, runroot and tmp dir of its
// own, so one agent's retire never sees another's containers of the same
// application; the machine's store is an additional read-only image store, for
// the busybox base image) and its own Caddy. Built on the deploy stack (the
// cluster's own first server is not part of a fleet). Issue 33.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "@relayctl/devkit";
import { Agent } from "./agent";
import { type CaddyServer, startCaddy } from "./caddy";
import { makeTempDir, onCleanup } from "./cleanup";
import { podmanOn } from "./containers";
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
    `[storage]\ndriver = "overlay"\ngraphroot = "${dir}/graph"\nrunroot = "${dir}/run"\n[storage.options]\nadditionalimagestores = ["/var/lib/containers/storage"]\n`,
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

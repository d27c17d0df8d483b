// The agent's deployer (agent/src/deploy) run in the test process, with no control plane:
// a real podman (runc recipe, containers.ts), a throwaway Caddy its routes are written to,
// and every JobProgress it emits kept in order. deploy-pipeline*.test.ts and
// deploy-queue-health.test.ts drive it; the stack behind the HTTP API is deploy-stack.ts.
// (Its own file so that the files using deploy-stack.ts do not load the agent's deployer.)
import type { JobProgress } from "@relayctl/proto";
import { Deployer } from "../../agent/src/deploy/deployer";
import { PodmanEngine } from "../../agent/src/engine/podman-engine";
import { RouteSyncRunner } from "../../agent/src/jobs/route-sync";
import { type CaddyServer, startCaddy } from "./caddy";
import { makeTempDir } from "./cleanup";

export interface PipelineStack {
  /** The agent's state dir (its deploy cache is under deploy/<application id>). */
  stateDir: string;
  caddy: CaddyServer;
  deployer: Deployer;
  /** Everything the deployer emitted, in order. */
  progress: JobProgress[];
}

/** The test process's environment must hold podmanAgentEnv's CONTAINERS_CONF: the engine CLI inherits it. */
export async function startPipelineStack(opts: { drainSeconds: number }): Promise<PipelineStack> {
  const caddy = await startCaddy();
  const stateDir = makeTempDir("agent-state");
  const proxy = {
    kind: "caddy" as const,
    upstream: "host" as const,
    adminUrl: caddy.adminUrl,
    serverName: "relayctl",
    listen: [`127.0.0.1:${caddy.httpPort}`],
    automaticHttps: false,
  };
  const routes = new RouteSyncRunner(proxy, stateDir, "podman");
  const progress: JobProgress[] = [];
  const deployer = new Deployer({
    settings: { stateDir, drainSeconds: opts.drainSeconds, network: undefined, init: true },
    target: { proxy, syncer: () => routes.syncer() },
    engine: () => new PodmanEngine(),
    emit: (p) => progress.push(p),
  });
  return { stateDir, caddy, deployer, progress };
}

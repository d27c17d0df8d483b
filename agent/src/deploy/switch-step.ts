// The switch step: the application's route moves to the new container through
// the agent's one RouteSyncer (the same ledger, routes.json, as external deploy
// route syncs), without knownApplicationIds, so no other route is touched.
// Host upstream mode: 127.0.0.1:<host port>; container-network mode:
// <container name>:<container port> on RELAYCTL_AGENT_DEPLOY_NETWORK. Without a
// proxy (or without domain names) the step only says where the version listens.
import type { RouteSyncer } from "@relayctl/reverse-proxy-sync";
import type { ProxyConfig } from "../config.js";
import { proxyWriteFailed } from "../proxy-status/proxy-monitor.js";
import { type DeployContext, StepError } from "./context.js";

export interface SwitchTarget {
  proxy: ProxyConfig;
  /** The agent's one syncer; undefined when no proxy is configured. */
  syncer: () => Promise<RouteSyncer> | undefined;
}

/** Returns the proxy's upstream, "" when no proxy serves the application. */
export async function switchRoute(
  ctx: DeployContext,
  target: SwitchTarget,
  container: { name: string; hostPort: number; image: string },
): Promise<string> {
  const { job, rec } = ctx;
  const where = `127.0.0.1:${container.hostPort}`;
  const pending = target.syncer();
  if (target.proxy.kind === "none" || pending === undefined) {
    rec.log("switch", `no reverse proxy configured on this agent: the new version listens on ${where}`);
    return "";
  }
  const syncer = await pending;
  if (job.fqdns.length === 0) {
    // No domain: no route. One left from earlier domains would point at a container retire removes.
    const report = await syncer.sync({ routes: [], remove: [job.applicationId] });
    if (report.removed.length > 0) rec.log("switch", "the application's route was removed (no domain names)");
    rec.log("switch", `the application has no domain names: the new version listens on ${where}`);
    return "";
  }
  const hostMode = target.proxy.upstream === "host";
  const report = await syncer.sync({
    routes: [
      {
        applicationId: job.applicationId,
        containerName: container.name,
        containerPort: hostMode ? container.hostPort : job.containerPort,
        imageTag: container.image,
        fqdns: job.fqdns,
      },
    ],
  });
  const outcome = report.routes[0];
  if (outcome === undefined || outcome.status === "failed") {
    // The proxy may have gone away: the agent checks it again now and reports it.
    proxyWriteFailed();
    // The syncer writes a route whole or not at all: whatever served before still does.
    throw new StepError(
      `the ${target.proxy.kind} proxy did not take the route: ${outcome?.error ?? "no outcome"}; the route was not changed (the previous version, if any, keeps serving)`,
    );
  }
  rec.log(
    "switch",
    `${outcome.fqdns.join(", ")} -> ${outcome.upstream} (${target.proxy.kind}, ${outcome.status})`,
  );
  return outcome.upstream;
}

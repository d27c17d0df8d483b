// The port check of route-sync jobs: before a route is written, the container
// engine must confirm that the named container runs and serves the port, so a
// sync cannot point a domain at any other port of the server (the control
// plane's own, a database...). Per upstream mode:
// - host: the container publishes the port on the host. `container_port` may
//   name the host port (what the deploy-sync action sends, and what relayctl
//   always routed to: 127.0.0.1:<port>) or the container's port, then the route
//   goes to the host port it is published on. A container on the host network
//   must expose the port.
// - container-network: the container exposes (or publishes) the port; the proxy
//   reaches it as <container_name>:<port>.
// A route that fails the check is reported `failed` with the reason and never
// reaches the syncer; the control plane turns it into a sync `errors` entry.
import {
  type DesiredRoute,
  type RouteOutcome,
  type RouteSyncer,
  type SyncReport,
  type SyncRequest,
  type UpstreamMode,
  routeProblem,
  routeSignature,
  sortedFqdns,
  upstreamFor,
} from "@relayctl/reverse-proxy-sync";
import {
  type ContainerFacts,
  type PortBinding,
  describePorts,
  parseInspect,
} from "../engine/container-facts.js";
import type { ContainerEngine } from "../engine/engine.js";

/** One inspect is a local CLI call; this only bounds a hung engine. */
const INSPECT_DEADLINE_SECONDS = 15;

export type PortVerdict = { upstream: string } | { error: string };

/** Where the proxy on the host reaches a binding; undefined for an IPv6-only one. */
function hostAddress(b: PortBinding): string | undefined {
  if (["", "0.0.0.0", "::", "127.0.0.1"].includes(b.hostIp)) return "127.0.0.1";
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(b.hostIp) ? b.hostIp : undefined;
}

function hostVerdict(c: ContainerFacts, port: number): PortVerdict {
  const name = c.name;
  if (c.networkMode === "host") {
    if (c.ports.has(port)) return { upstream: `127.0.0.1:${port}` };
    return {
      error: `container '${name}' runs on the host network and does not expose port ${port} (EXPOSE it in the image or run it with --expose ${port})`,
    };
  }
  const all = [...c.ports.values()].flat();
  // The host port itself, published by this container: the upstream relayctl always used.
  const asHostPort = all.find((b) => b.hostPort === port && hostAddress(b) !== undefined);
  if (asHostPort) return { upstream: `${hostAddress(asHostPort)}:${port}` };
  const published = (c.ports.get(port) ?? []).find((b) => hostAddress(b) !== undefined);
  if (published) return { upstream: `${hostAddress(published)}:${published.hostPort}` };
  return {
    error: `container '${name}' does not publish port ${port} on the host (its ports: ${describePorts(c.ports)})`,
  };
}

function networkVerdict(c: ContainerFacts, port: number): PortVerdict {
  if (c.ports.has(port)) return { upstream: `${c.name}:${port}` };
  return {
    error: `container '${c.name}' does not expose port ${port} (its ports: ${describePorts(c.ports)}; EXPOSE it in the image or run it with --expose ${port})`,
  };
}

/** The decision for one container's inspect facts (pure: the tests feed it engine output). */
export function portVerdict(
  facts: ContainerFacts,
  containerName: string,
  port: number,
  mode: UpstreamMode,
): PortVerdict {
  // `container inspect` also takes an id prefix: the container found must carry the name asked for.
  if (facts.name !== containerName) {
    return { error: `no container is named '${containerName}' on this server` };
  }
  if (!facts.running) return { error: `container '${containerName}' is not running (${facts.status})` };
  return mode === "host" ? hostVerdict(facts, port) : networkVerdict(facts, port);
}

export class PortCheck {
  constructor(
    readonly engine: ContainerEngine,
    readonly mode: UpstreamMode,
  ) {}

  /** Inspects each container once (two applications may share one). */
  async verdicts(routes: DesiredRoute[]): Promise<PortVerdict[]> {
    const facts = new Map<string, Promise<ContainerFacts | string>>();
    for (const r of routes) {
      if (!facts.has(r.containerName)) facts.set(r.containerName, this.#inspect(r.containerName));
    }
    return Promise.all(
      routes.map(async (r) => {
        const f = await facts.get(r.containerName)!;
        return typeof f === "string"
          ? { error: f }
          : portVerdict(f, r.containerName, r.containerPort, this.mode);
      }),
    );
  }

  async #inspect(name: string): Promise<ContainerFacts | string> {
    const e = this.engine.name;
    const o = await this.engine.inspect(name, INSPECT_DEADLINE_SECONDS);
    if (o.status !== "completed") return `cannot ask ${e} about container '${name}': ${o.error ?? o.status}`;
    if (o.exitCode !== 0) {
      const why = o.stderr.trim().split("\n")[0]?.slice(0, 300) || `exit code ${o.exitCode}`;
      return /no such (container|object)/i.test(why)
        ? `no container is named '${name}' on this server (${e}: ${why})`
        : `cannot inspect container '${name}' with ${e}: ${why}`;
    }
    return parseInspect(o.stdout) ?? `${e} container inspect '${name}' gave no container`;
  }
}

function refused(route: DesiredRoute, mode: UpstreamMode, error: string): RouteOutcome {
  return {
    applicationId: route.applicationId,
    status: "failed",
    signatureHash: routeSignature(route, mode),
    fqdns: sortedFqdns(route.fqdns),
    upstream: upstreamFor(route, mode),
    error,
  };
}

/**
 * Checks every route's port, gives the syncer only the routes that passed (with
 * the upstream the engine showed), and reports all of them in request order.
 * Routes the syncer refuses anyway (bad names...) skip the engine.
 */
export async function syncCheckedRoutes(
  syncer: RouteSyncer,
  check: PortCheck,
  req: SyncRequest,
): Promise<SyncReport> {
  const toCheck = req.routes.filter((r) => routeProblem(r) === undefined);
  const verdicts = new Map<DesiredRoute, PortVerdict>();
  (await check.verdicts(toCheck)).forEach((v, i) => verdicts.set(toCheck[i]!, v));
  const passed: DesiredRoute[] = [];
  const outcomes: (RouteOutcome | undefined)[] = req.routes.map((r) => {
    const v = verdicts.get(r);
    if (v !== undefined && "error" in v) return refused(r, check.mode, v.error);
    passed.push(v === undefined ? r : { ...r, upstream: v.upstream });
    return undefined;
  });
  const report = await syncer.sync({ ...req, routes: passed });
  const synced = report.routes[Symbol.iterator]();
  return { routes: outcomes.map((o) => o ?? synced.next().value!), removed: report.removed };
}

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
// A name that is no container's may be a compose service: its one running
// container (label com.docker.compose.service) is checked in its place.
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
import type { ContainerView } from "../engine/container-view.js";
import type { EngineApi } from "../engine/engine-api.js";
import type { ContainerEngine, EngineOutcome } from "../engine/engine.js";

/** One inspect is a local CLI call; this only bounds a hung engine. */
const INSPECT_DEADLINE_SECONDS = 15;
/**
 * Names per `container inspect` call: each container is ~11 KB of JSON (podman
 * 4.3) and the engine's output is capped at 1 MiB, so 100 at once would be cut.
 */
const INSPECT_BATCH = 25;

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
    /**
     * The engine's API socket (engine-api.ts): asked first, the same inspect
     * document in a few ms instead of a CLI process; the CLI answers when the
     * socket does not.
     */
    readonly api?: EngineApi,
    /**
     * The engine's containers kept from its event stream (container-view.ts):
     * read instead of the list when it has caught up with the engine.
     */
    readonly view?: ContainerView,
  ) {}

  /**
   * One `container inspect` per batch of the job's containers (a sync of 100
   * applications is 4 engine calls, not 100 CLI processes at once) for the
   * routes the view (or else the list) did not prove.
   */
  async verdicts(routes: DesiredRoute[]): Promise<PortVerdict[]> {
    const listed = (await this.#viewed(routes)) ?? (await this.#listed(routes));
    const rest = routes.filter((_, i) => listed[i] === undefined);
    const inspected = rest.length > 0 ? (await this.#inspected(rest))[Symbol.iterator]() : undefined;
    return listed.map((v) => v ?? inspected!.next().value!);
  }

  /**
   * The routes the container view proves: the container now named so runs and
   * serves the port (the same decision as on inspect's facts). Only a yes is
   * taken from the view; a miss (unknown name, port not found, not running, a
   * compose service's name) is asked of the engine (inspect) before any refusal.
   * Undefined when there is no view or it could not catch up: then the list.
   */
  async #viewed(routes: DesiredRoute[]): Promise<(PortVerdict | undefined)[] | undefined> {
    if (this.view === undefined || routes.length === 0) return undefined;
    if (!(await this.view.current(routes.map((r) => r.containerName)))) return undefined;
    return routes.map((r) => {
      const facts = this.view!.lookup(r.containerName);
      // Podman's list does not carry the network mode: a host-network container is left to inspect.
      if (facts === undefined || facts.networkMode === "host") return undefined;
      const v = portVerdict(facts, r.containerName, r.containerPort, this.mode);
      return "upstream" in v ? v : undefined;
    });
  }

  /**
   * The routes the engine API's container list already proves: a running
   * container publishing the port on the host (host mode). Asked only when the
   * container view cannot answer (podman's own list on podman, docker's on
   * docker: engine-api.ts), and never kept: a container replaced a moment ago is
   * seen as it is now.
   * Everything else (not listed, stopped, a port only exposed, container-network
   * mode, any refusal and its message) is left to inspect, so the list only ever
   * short-cuts a yes that inspect would give too.
   */
  async #listed(routes: DesiredRoute[]): Promise<(PortVerdict | undefined)[]> {
    const none = routes.map(() => undefined);
    if (this.api === undefined || this.mode !== "host" || routes.length === 0) return none;
    const all = await this.api.list(INSPECT_DEADLINE_SECONDS);
    if (all === undefined) return none;
    return routes.map((r) => {
      const facts = all.get(r.containerName);
      if (facts === undefined || facts.networkMode === "host") return undefined;
      const v = portVerdict(facts, r.containerName, r.containerPort, this.mode);
      return "upstream" in v ? v : undefined;
    });
  }

  async #inspected(routes: DesiredRoute[]): Promise<PortVerdict[]> {
    const found = await this.#facts([...new Set(routes.map((r) => r.containerName))]);
    const missing = [...found].filter(([, f]) => f === undefined).map(([name]) => name);
    const services = await this.#composeFacts(missing);
    return routes.map((r) => {
      const name = r.containerName;
      const f = found.get(name) ?? services.get(name);
      if (typeof f === "string") return { error: f };
      if (f === undefined) return { error: `no container is named '${name}' on this server` };
      // A compose service answers under its name (also its DNS alias on the compose network).
      return portVerdict({ ...f, name }, name, r.containerPort, this.mode);
    });
  }

  /** Facts by name; a string for a batch the engine could not answer, undefined for no such container. */
  async #facts(names: string[]): Promise<Map<string, ContainerFacts | string | undefined>> {
    const batches: string[][] = [];
    for (let i = 0; i < names.length; i += INSPECT_BATCH) batches.push(names.slice(i, i + INSPECT_BATCH));
    const answers = await Promise.all(batches.map((b) => this.#inspect(b)));
    const out = new Map<string, ContainerFacts | string | undefined>();
    batches.forEach((batch, i) => {
      const a = answers[i]!;
      for (const name of batch) out.set(name, typeof a === "string" ? a : a.get(name));
    });
    return out;
  }

  /**
   * Names that are no container's may be compose services (compose names their
   * containers <project>-<service>-<n>): the one running container labelled
   * com.docker.compose.service=<name> stands for it; several are ambiguous.
   */
  async #composeFacts(names: string[]): Promise<Map<string, ContainerFacts | string | undefined>> {
    const out = new Map<string, ContainerFacts | string | undefined>();
    const listed = await Promise.all(
      names.map((n) => this.engine.composeServiceContainers(n, INSPECT_DEADLINE_SECONDS)),
    );
    const single = new Map<string, string>();
    names.forEach((name, i) => {
      const o = listed[i]!;
      const containers =
        o.status === "completed" && o.exitCode === 0 ? o.stdout.split("\n").filter(Boolean) : [];
      if (containers.length === 1) single.set(name, containers[0]!);
      if (containers.length > 1) {
        out.set(
          name,
          `compose service '${name}' has ${containers.length} running containers (${containers.slice(0, 5).join(", ")}): sync one container by its name`,
        );
      }
    });
    const facts = await this.#facts([...new Set(single.values())]);
    for (const [name, container] of single) out.set(name, facts.get(container));
    return out;
  }

  async #inspect(names: string[]): Promise<Map<string, ContainerFacts> | string> {
    const e = this.engine.name;
    const o = await this.#inspectCall(names);
    if (o.status !== "completed") return `cannot ask ${e} about the containers: ${o.error ?? o.status}`;
    // A missing name makes the exit non-zero while the others are still printed.
    const facts = parseInspect(o.stdout);
    const stderr = o.stderr.trim().split("\n").filter(Boolean);
    if (o.exitCode === 0 && facts.size === 0) return `${e} container inspect printed no readable container`;
    if (o.exitCode !== 0 && facts.size === 0 && !stderr.some((l) => /no such (container|object)/i.test(l))) {
      return `cannot inspect containers with ${e}: ${stderr[0]?.slice(0, 300) || `exit code ${o.exitCode}`}`;
    }
    return facts;
  }

  async #inspectCall(names: string[]): Promise<EngineOutcome> {
    const viaApi = await this.api?.inspect(names, INSPECT_DEADLINE_SECONDS);
    if (viaApi?.status === "completed") return viaApi;
    return this.engine.inspect(names, INSPECT_DEADLINE_SECONDS);
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
 * Routes the syncer refuses anyway (bad names...) skip the engine. The syncer
 * reads the proxy while the engine is asked (independent); it plans and writes
 * only once every verdict is in.
 */
export async function syncCheckedRoutes(
  syncer: RouteSyncer,
  check: PortCheck,
  req: SyncRequest,
  /** Nothing is planned or written before it resolves, and nothing at all if it rejects (the job's claim). */
  gate?: Promise<void>,
): Promise<SyncReport> {
  const toCheck = req.routes.filter((r) => routeProblem(r) === undefined);
  let outcomes: (RouteOutcome | undefined)[] = [];
  const checked = Promise.all([check.verdicts(toCheck), gate]).then(([list]) => {
    const verdicts = new Map<DesiredRoute, PortVerdict>();
    list.forEach((v, i) => verdicts.set(toCheck[i]!, v));
    const passed: DesiredRoute[] = [];
    outcomes = req.routes.map((r) => {
      const v = verdicts.get(r);
      if (v !== undefined && "error" in v) return refused(r, check.mode, v.error);
      passed.push(v === undefined ? r : { ...r, upstream: v.upstream });
      return undefined;
    });
    return { ...req, routes: passed };
  });
  const report = await syncer.sync(checked);
  const synced = report.routes[Symbol.iterator]();
  const routes = outcomes.map((o) => o ?? synced.next().value!);
  // Then the routes a drain change rewrote from the ledger (not in req.routes).
  return { routes: [...routes, ...synced], removed: report.removed };
}

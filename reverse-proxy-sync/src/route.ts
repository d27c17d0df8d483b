// Desired routes and what they are checked against. Both ends use this file: the
// control plane validates applications with it, and the agent validates every
// route again before any of it reaches a proxy config (the wire is not trusted).
import { createHash } from "node:crypto";
import { UUID } from "./uuid.js";

/** One application's route as the control plane asks for it. */
export interface DesiredRoute {
  applicationId: string;
  containerName: string;
  containerPort: number;
  /** Image reference the pipeline deployed (part of the signature, not of the proxy config). */
  imageTag: string;
  /** Domain names, validated with validFqdn; order does not matter. */
  fqdns: string[];
  /**
   * `host:port` the proxy sends traffic to, when the agent resolved it from the
   * container engine (host mode: where the container publishes the port). Absent:
   * the mode's default (upstreamFor).
   */
  upstream?: string;
}

/**
 * Where the proxy sends traffic: `host` → `127.0.0.1:<port>` (proxy on the host,
 * container port published on loopback); `container-network` →
 * `<container_name>:<port>` (proxy on a shared container network).
 */
export type UpstreamMode = "host" | "container-network";

/** A route as a proxy serves it: what adapters write and read back. */
export interface RenderedRoute {
  applicationId: string;
  /** Sorted, lower case, no duplicates. */
  fqdns: string[];
  /** host:port */
  upstream: string;
  /**
   * The application is draining on this server: its health path
   * (HEALTH_PATH) answers 503 `draining` instead of 200 `live`. Absent is live.
   */
  draining?: boolean;
}

/**
 * Answered by the proxy itself on every application route it writes (caddy and
 * nginx), for a load balancer in front of a fleet (docs/fleets.md "Traffic").
 */
export const HEALTH_PATH = "/.well-known/relayctl/health";

// RFC 1123 labels: letters, digits, inner hyphens, 1-63 characters.
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
// docker's rule for container names (daemon/names.RestrictedNamePattern).
const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$/;
// An IPv4 address or a container name, then a port: what proxy configs may name.
const UPSTREAM = /^(?:\d{1,3}(?:\.\d{1,3}){3}|[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}):(\d{1,5})$/;

/**
 * A domain name of RFC 1123 labels (at least two, none all-numeric at the top),
 * at most 253 characters, optionally starting with `*.` (one wildcard label).
 * Lower case only: callers normalise with normalizeFqdn first.
 */
export function validFqdn(name: string): boolean {
  if (typeof name !== "string" || name.length === 0 || name.length > 253) return false;
  const bare = name.startsWith("*.") ? name.slice(2) : name;
  const labels = bare.split(".");
  if (labels.length < 2) return false;
  if (!labels.every((l) => LABEL.test(l))) return false;
  return !/^[0-9]+$/.test(labels[labels.length - 1]!);
}

export function normalizeFqdn(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, "");
}

export function validContainerName(name: string): boolean {
  return typeof name === "string" && CONTAINER_NAME.test(name);
}

export function validPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

export function validApplicationId(id: string): boolean {
  return typeof id === "string" && UUID.test(id);
}

/** Why a route must not reach a proxy, or undefined when it may. */
export function routeProblem(route: DesiredRoute): string | undefined {
  if (!validApplicationId(route.applicationId)) return "invalid application id";
  if (!validContainerName(route.containerName)) return `invalid container name '${route.containerName}'`;
  if (!validPort(route.containerPort)) return `invalid container port ${route.containerPort}`;
  if (route.upstream !== undefined && !validUpstream(route.upstream)) {
    return `invalid upstream '${String(route.upstream).slice(0, 300)}'`;
  }
  if (route.fqdns.length === 0) return "the application has no bound domain names";
  const bad = route.fqdns.find((f) => !validFqdn(f));
  if (bad !== undefined) return `invalid domain name '${bad.slice(0, 300)}'`;
  return undefined;
}

/** `<IPv4 or container name>:<port 1-65535>`. */
export function validUpstream(upstream: string): boolean {
  const m = typeof upstream === "string" ? UPSTREAM.exec(upstream) : null;
  return m !== null && validPort(Number(m[1]));
}

export function upstreamFor(
  route: Pick<DesiredRoute, "containerName" | "containerPort" | "upstream">,
  mode: UpstreamMode,
) {
  if (route.upstream !== undefined) return route.upstream;
  return mode === "host"
    ? `127.0.0.1:${route.containerPort}`
    : `${route.containerName}:${route.containerPort}`;
}

export function sortedFqdns(fqdns: string[]): string[] {
  return [...new Set(fqdns)].sort();
}

export function renderRoute(route: DesiredRoute, mode: UpstreamMode): RenderedRoute {
  return {
    applicationId: route.applicationId,
    fqdns: sortedFqdns(route.fqdns),
    upstream: upstreamFor(route, mode),
  };
}

/**
 * `sha256:` + hex SHA-256 of the canonical desired route (DESIGN.md "External
 * deploy"): container name, port, image tag, sorted FQDNs and upstream, as JSON
 * with keys in this fixed order.
 */
export function routeSignature(route: DesiredRoute, mode: UpstreamMode): string {
  const canonical = JSON.stringify({
    container_name: route.containerName,
    container_port: route.containerPort,
    image_tag: route.imageTag,
    fqdns: sortedFqdns(route.fqdns),
    upstream: upstreamFor(route, mode),
  });
  return `sha256:${createHash("sha256").update(canonical).digest("hex")}`;
}

/** Same domains, upstream and drain state. */
export function sameRoute(a: RenderedRoute, b: RenderedRoute): boolean {
  return (
    a.upstream === b.upstream &&
    (a.draining ?? false) === (b.draining ?? false) &&
    a.fqdns.length === b.fqdns.length &&
    a.fqdns.every((f, i) => f === b.fqdns[i])
  );
}

// Reads the services a pipeline started from its compose file: for each service
// its name (matched to an application's linked_container_name), the port the
// proxy should reach and the image it runs. Pure: no runner or network calls.
import { parse } from "yaml";
import { interpolate } from "./interpolate.js";

export interface ServiceTarget {
  /** Compose service name, or the name given in the `services` input. */
  name: string;
  /** Port the proxy should reach; absent when the service publishes none. */
  port?: number;
  /** Image reference the service runs; absent when it is only built. */
  image?: string;
  /** A remark worth a log line (several ports, a range, a UDP-only port). */
  note?: string;
}

export type PortChoice = "published" | "target";

export class TargetError extends Error {
  override name = "TargetError";
}

interface PortMapping {
  target: number;
  published?: number;
  protocol: string;
}

function toPort(value: unknown, where: string): number {
  const text = String(value).trim();
  const first = text.split("-")[0];
  const port = /^\d+$/.test(first) ? Number(first) : Number.NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new TargetError(`${where}: '${text}' is not a port (1-65535)`);
  }
  return port;
}

/** Short syntax: "80", "8080:80", "127.0.0.1:8080:80", "[::1]:8080:80/tcp", "8000-8001:80-81". */
function shortPort(spec: string | number, where: string): PortMapping {
  const [mapping, protocol = "tcp"] = String(spec).trim().split("/");
  const withoutIp = mapping.replace(/^\[[^\]]*\]:/, "");
  const parts = withoutIp.split(":");
  const target = toPort(parts[parts.length - 1], where);
  const hostPart = parts.length >= 2 ? parts[parts.length - 2] : "";
  const published = hostPart === "" ? undefined : toPort(hostPart, where);
  return { target, published, protocol: protocol.toLowerCase() };
}

function longPort(spec: Record<string, unknown>, where: string): PortMapping {
  if (spec.target === undefined) throw new TargetError(`${where}: long port syntax needs 'target'`);
  const target = toPort(spec.target, where);
  const published =
    spec.published === undefined || spec.published === "" ? undefined : toPort(spec.published, where);
  return { target, published, protocol: String(spec.protocol ?? "tcp").toLowerCase() };
}

function portsOf(service: Record<string, unknown>, where: string): PortMapping[] {
  const ports = service.ports ?? [];
  if (!Array.isArray(ports)) throw new TargetError(`${where}.ports must be a list`);
  const mappings = ports.map((p, i) =>
    p !== null && typeof p === "object"
      ? longPort(p as Record<string, unknown>, `${where}.ports[${i}]`)
      : shortPort(p as string | number, `${where}.ports[${i}]`),
  );
  const expose = service.expose ?? [];
  if (!Array.isArray(expose)) throw new TargetError(`${where}.expose must be a list`);
  for (const [i, e] of expose.entries())
    mappings.push(shortPort(e as string | number, `${where}.expose[${i}]`));
  return mappings;
}

/** The first TCP mapping wins; a user who needs another port names it in `services`. */
function choosePort(mappings: PortMapping[], choice: PortChoice): { port?: number; note?: string } {
  const tcp = mappings.filter((m) => m.protocol === "tcp");
  if (tcp.length === 0) {
    return mappings.length > 0 ? { note: "only non-TCP ports; using the application's port" } : {};
  }
  const first = tcp[0];
  const port = choice === "published" && first.published !== undefined ? first.published : first.target;
  const note = tcp.length > 1 ? `${tcp.length} TCP ports; using the first (${port})` : undefined;
  return { port, note };
}

/** Parses a compose file's text into service targets, in file order. */
export function composeTargets(
  text: string,
  env: Record<string, string | undefined>,
  choice: PortChoice = "published",
): ServiceTarget[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (err) {
    throw new TargetError(`not valid YAML: ${(err as Error).message}`, { cause: err });
  }
  const services = (doc as { services?: unknown } | null)?.services;
  if (services === null || typeof services !== "object" || Array.isArray(services)) {
    throw new TargetError("has no 'services' mapping");
  }
  const targets: ServiceTarget[] = [];
  for (const [name, raw] of Object.entries(services as Record<string, unknown>)) {
    const where = `services.${name}`;
    const service = interpolate(raw ?? {}, env, where) as Record<string, unknown>;
    if (typeof service !== "object" || Array.isArray(service)) {
      throw new TargetError(`${where} must be a mapping`);
    }
    const { port, note } = choosePort(portsOf(service, where), choice);
    const image = typeof service.image === "string" && service.image !== "" ? service.image : undefined;
    targets.push({ name, port, image, note });
  }
  if (targets.length === 0) throw new TargetError("defines no services");
  return targets;
}

/** The `services` input: `name:port` entries, one per line or comma-separated. */
export function serviceListTargets(entries: string[]): ServiceTarget[] {
  const targets: ServiceTarget[] = [];
  for (const entry of entries.flatMap((line) => line.split(",")).map((e) => e.trim())) {
    if (entry === "") continue;
    const match = /^([^:\s]+):(\d+)$/.exec(entry);
    if (!match) throw new TargetError(`services: '${entry}' is not a 'name:port' entry`);
    targets.push({ name: match[1], port: toPort(match[2], `services: '${entry}'`) });
  }
  if (targets.length === 0) throw new TargetError("services: no 'name:port' entries");
  return targets;
}

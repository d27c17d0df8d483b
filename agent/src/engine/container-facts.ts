// What the agent needs to know about one container, read from `<engine>
// container inspect` output. Docker and podman print the same top-level shape
// but differ in detail: docker lists exposed ports in Config.ExposedPorts,
// podman 4 only as keys of NetworkSettings.Ports with a null binding list;
// docker names start with "/", podman's do not. Both are read here.

export interface PortBinding {
  /** As the engine reports it: "" / 0.0.0.0 / :: mean every address. */
  hostIp: string;
  hostPort: number;
}

export interface ContainerFacts {
  /** The engine's full container id (inspect and both lists carry it; the container view keys by it). */
  id?: string;
  /** Without docker's leading "/". */
  name: string;
  running: boolean;
  /**
   * The engine's state word (running, exited, created...). Podman says "stopped" for a
   * container whose process exited and whose cleanup (conmon's `podman container cleanup`)
   * has not run yet, "exited" after it: both are a process that ended.
   */
  status: string;
  /** The exit code of its last run (State.ExitCode); undefined when the engine gives none. */
  exitCode?: number;
  /** Restarts by the engine's restart policy since the container was created (inspect only; lists lack it). */
  restartCount?: number;
  /** "host" when the container shares the host's network stack. */
  networkMode: string;
  /** TCP container port → its host bindings (empty: exposed, not published). */
  ports: Map<number, PortBinding[]>;
}

type Json = Record<string, unknown>;

const obj = (v: unknown): Json => (v !== null && typeof v === "object" ? (v as Json) : {});

/** "8080/tcp" or "8080" → 8080; other protocols and junk → undefined. */
function tcpPort(key: string): number | undefined {
  const m = /^(\d{1,5})(?:\/(tcp))?$/.exec(key);
  const port = m ? Number(m[1]) : Number.NaN;
  return port >= 1 && port <= 65535 ? port : undefined;
}

function bindings(list: unknown): PortBinding[] {
  if (!Array.isArray(list)) return [];
  return list.flatMap((b) => {
    const port = Number(obj(b).HostPort);
    if (!Number.isInteger(port) || port < 1 || port > 65535) return [];
    return [{ hostIp: String(obj(b).HostIp ?? ""), hostPort: port }];
  });
}

/** The containers of an inspect answer by name; empty when it is not one. */
export function parseInspect(stdout: string): Map<string, ContainerFacts> {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    return new Map();
  }
  const out = new Map<string, ContainerFacts>();
  for (const item of Array.isArray(doc) ? doc : []) {
    const facts = containerFacts(obj(item));
    if (facts) out.set(facts.name, facts);
  }
  return out;
}

function containerFacts(c: Json): ContainerFacts | undefined {
  if (typeof c.Name !== "string") return undefined;
  const state = obj(c.State);
  const ports = new Map<number, PortBinding[]>();
  for (const key of Object.keys(obj(obj(c.Config).ExposedPorts))) {
    const port = tcpPort(key);
    if (port !== undefined) ports.set(port, []);
  }
  for (const [key, list] of Object.entries(obj(obj(c.NetworkSettings).Ports))) {
    const port = tcpPort(key);
    if (port !== undefined) ports.set(port, [...(ports.get(port) ?? []), ...bindings(list)]);
  }
  return {
    ...(typeof c.Id === "string" ? { id: c.Id } : {}),
    name: c.Name.replace(/^\//, ""),
    running: state.Running === true,
    status: typeof state.Status === "string" ? state.Status : "unknown",
    ...(Number.isSafeInteger(state.ExitCode) ? { exitCode: state.ExitCode as number } : {}),
    restartCount: Number(c.RestartCount ?? 0) || 0,
    networkMode: String(obj(c.HostConfig).NetworkMode ?? ""),
    ports,
  };
}

/** "8080/tcp → 127.0.0.1:41999, 9090/tcp" for messages; "none" when empty. */
export function describePorts(ports: Map<number, PortBinding[]>): string {
  if (ports.size === 0) return "none";
  return [...ports]
    .sort(([a], [b]) => a - b)
    .map(([port, list]) =>
      list.length === 0
        ? `${port}/tcp`
        : `${port}/tcp → ${list.map((b) => `${b.hostIp || "0.0.0.0"}:${b.hostPort}`).join(", ")}`,
    )
    .join("; ");
}

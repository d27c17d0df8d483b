// The container engine's HTTP API on its unix socket, for the one question a
// route sync asks of every route: what does `container inspect` say about these
// containers. Starting the CLI costs 0.1–0.45 s a call on these machines; the
// socket answers one container in a few ms. Docker's daemon serves the API on
// /var/run/docker.sock; podman serves the same (docker-compatible) API with
// `podman system service` (the podman.socket unit). Both answer
// GET /containers/<name>/json with the document the CLI prints for that name
// (unversioned: the engine's own API version; docker 29 refuses versions < 1.44).
//
// The socket is where the CLI itself would go: DOCKER_HOST / CONTAINER_HOST when
// they name a unix socket, else the engine's default path. No socket, or one that
// does not answer, is not an error: the caller falls back to the CLI.
//
// The container list goes through podman's own API when podman serves the socket:
// its docker-compatible list of 104 containers took 80–95 ms p50 here, its
// /libpod/containers/json 44–50 ms (podman 4.3.1, 2-core machine, load 0.5–1.1;
// bench/README.md, route-sync), and the compatible list shows only the first port
// of a published range. It is asked once to build the container view
// (container-view.ts), which then follows the engine's `/events` on the same
// socket (`stream`, `get`) instead of listing at each sync.
import http from "node:http";
import type { Socket } from "node:net";
import type { ContainerFacts, PortBinding } from "./container-facts.js";
import type { EngineOutcome } from "./engine.js";

/** Keep-alive connections to one socket; a sync of 100 routes asks at most this many at once. */
const MAX_SOCKETS = 8;

/** The unix socket of the engine's API, or undefined when the engine is reached otherwise (tcp, ssh). */
export function engineSocketPath(
  engine: string,
  env: NodeJS.ProcessEnv = process.env,
  uid: number = process.getuid?.() ?? 0,
): string | undefined {
  const host = engine === "docker" ? env.DOCKER_HOST : (env.CONTAINER_HOST ?? env.DOCKER_HOST);
  if (host) return host.startsWith("unix://") ? host.slice("unix://".length) : undefined;
  if (engine === "docker") return "/var/run/docker.sock";
  if (uid === 0) return "/run/podman/podman.sock";
  return env.XDG_RUNTIME_DIR ? `${env.XDG_RUNTIME_DIR}/podman/podman.sock` : undefined;
}

export interface ApiAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Which container list a socket is asked: docker's API (docker, or podman's compatible one) or podman's own. */
export type ListFlavour = "docker" | "libpod";

export interface EngineApiOptions {
  /**
   * The container list to ask. @default "detect": podman's own when the socket
   * answers `GET /_ping` with a `Libpod-Api-Version` header (docker's daemon never
   * does), else docker's. The tests pin each flavour to compare them.
   */
  list?: ListFlavour | "detect";
}

interface ListRoute {
  flavour: ListFlavour;
  path: string;
  entry: (item: unknown) => ContainerFacts | undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v !== null && typeof v === "object" ? (v as Json) : {});

function addBinding(ports: Map<number, PortBinding[]>, port: number, binding: PortBinding): void {
  ports.set(port, [...(ports.get(port) ?? []), binding]);
}

function listed(c: Json, name: unknown, ports: Map<number, PortBinding[]>): ContainerFacts | undefined {
  if (typeof name !== "string") return undefined;
  const state = typeof c.State === "string" ? c.State : "unknown";
  return {
    ...(typeof c.Id === "string" ? { id: c.Id } : {}),
    name: name.replace(/^\//, ""),
    running: state === "running",
    status: state,
    // Docker's list carries it; podman's lists do not (a podman container on the
    // host network lists no ports, so nothing of it is proved by a list).
    networkMode: String(obj(c.HostConfig).NetworkMode ?? ""),
    ports,
  };
}

/** One entry of docker's `GET /containers/json` as facts: names, state and published TCP bindings. */
export function dockerListedFacts(item: unknown): ContainerFacts | undefined {
  const c = obj(item);
  const ports = new Map<number, PortBinding[]>();
  for (const p of Array.isArray(c.Ports) ? c.Ports.map(obj) : []) {
    const port = Number(p.PrivatePort);
    const hostPort = Number(p.PublicPort);
    if (p.Type !== "tcp" || !Number.isInteger(port) || !Number.isInteger(hostPort) || hostPort < 1) continue;
    addBinding(ports, port, { hostIp: String(p.IP ?? ""), hostPort });
  }
  return listed(c, Array.isArray(c.Names) ? c.Names[0] : undefined, ports);
}

const isPort = (n: number) => Number.isInteger(n) && n >= 1 && n <= 65535;

/**
 * One entry of podman's `GET /libpod/containers/json` as the same facts. Its
 * Ports are the container's port mappings: `range` consecutive ports from
 * `container_port` published on as many from `host_port` (inspect lists each of
 * them; 0 or none: 1), `protocol` one or more of tcp, udp, sctp joined by commas
 * (empty: tcp).
 */
export function libpodListedFacts(item: unknown): ContainerFacts | undefined {
  const c = obj(item);
  const ports = new Map<number, PortBinding[]>();
  for (const p of Array.isArray(c.Ports) ? c.Ports.map(obj) : []) {
    const protocols = String(p.protocol || "tcp").split(",");
    if (!protocols.includes("tcp")) continue;
    const port = Number(p.container_port);
    const hostPort = Number(p.host_port);
    const range = Number(p.range ?? 1) || 1;
    if (!isPort(port) || !isPort(hostPort) || !Number.isInteger(range) || range < 1) continue;
    if (!isPort(port + range - 1) || !isPort(hostPort + range - 1)) continue;
    const hostIp = String(p.host_ip ?? "");
    for (let i = 0; i < range; i++) addBinding(ports, port + i, { hostIp, hostPort: hostPort + i });
  }
  return listed(c, Array.isArray(c.Names) ? c.Names[0] : undefined, ports);
}

const DOCKER_LIST: ListRoute = {
  flavour: "docker",
  path: "/containers/json?all=true",
  entry: dockerListedFacts,
};

/** podman serves its own API only under a version prefix (podman 4.3: unversioned /libpod/... is a 404). */
const libpodList = (version: string): ListRoute => ({
  flavour: "libpod",
  path: `/v${version}/libpod/containers/json?all=true`,
  entry: libpodListedFacts,
});

export class EngineApi {
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });
  readonly #pinned: ListFlavour | undefined;
  /** The list the socket's engine is asked, learnt once while its connections stay open. */
  #route: Promise<ListRoute> | undefined;
  readonly #watched = new WeakSet<Socket>();

  constructor(
    /** `docker` or `podman`, for messages. */
    readonly name: string,
    readonly socketPath: string,
    options: EngineApiOptions = {},
  ) {
    this.#pinned = options.list === "detect" ? undefined : options.list;
  }

  /**
   * Shaped like the CLI's `container inspect <names>...`: the containers found as
   * one JSON array on stdout, exit code 1 and a "no such container" line on
   * stderr per missing name. status `failed` when the socket does not answer
   * (absent, refused, not allowed): the caller then asks the CLI.
   */
  async inspect(containerNames: string[], deadlineSeconds: number): Promise<EngineOutcome> {
    const started = Date.now();
    const outcome = (o: Omit<EngineOutcome, "durationMs">): EngineOutcome => ({
      ...o,
      durationMs: Date.now() - started,
    });
    let answers: ApiAnswer[];
    try {
      answers = await Promise.all(
        containerNames.map((n) =>
          this.#get(`/containers/${encodeURIComponent(n)}/json`, deadlineSeconds * 1000),
        ),
      );
    } catch (err) {
      const why = `${this.name} API socket ${this.socketPath}: ${(err as Error).message}`;
      return outcome({ status: "failed", exitCode: -1, stdout: "", stderr: "", error: why });
    }
    const found: unknown[] = [];
    const stderr: string[] = [];
    for (const [i, a] of answers.entries()) {
      const name = containerNames[i];
      const doc = a.status === 200 ? parseJson(a.body) : undefined;
      if (doc !== undefined) found.push(doc);
      // podman answers 500 "no such container" for one it is removing right then.
      else if (a.status === 404 || (a.status === 500 && /no such container/i.test(a.body))) {
        stderr.push(`Error: no such container ${name}`);
      } else {
        // Anything else is the API failing, not an answer about the container: the CLI decides.
        const why = `${this.name} API socket ${this.socketPath}: HTTP ${a.status} for ${name}: ${a.body.trim().slice(0, 300)}`;
        return outcome({ status: "failed", exitCode: -1, stdout: "", stderr: "", error: why });
      }
    }
    return outcome({
      status: "completed",
      exitCode: stderr.length === 0 ? 0 : 1,
      stdout: JSON.stringify(found),
      stderr: stderr.join("\n"),
    });
  }

  /**
   * Every container as the engine lists it now, in one call (podman serves
   * inspects one at a time, ~1 ms each): podman's own list when podman answers
   * the socket, docker's otherwise. A list shows names, state and published
   * ports only: not the ports a container exposes without publishing them, and
   * (podman) not its network mode, so only a published binding read here is as
   * good as an inspect. Undefined when the socket does not answer.
   */
  async list(deadlineSeconds: number): Promise<Map<string, ContainerFacts> | undefined> {
    const timeoutMs = deadlineSeconds * 1000;
    let route: ListRoute;
    let answer: ApiAnswer;
    try {
      route = await this.#listRoute(timeoutMs);
      answer = await this.#get(route.path, timeoutMs);
    } catch {
      this.#route = undefined;
      return undefined;
    }
    const doc = answer.status === 200 ? parseJson(answer.body) : undefined;
    if (!Array.isArray(doc)) {
      // Another engine behind the same path (a 404 for libpod's list): ask it again next time.
      this.#route = undefined;
      return undefined;
    }
    const out = new Map<string, ContainerFacts>();
    for (const item of doc) {
      const facts = route.entry(item);
      if (facts) out.set(facts.name, facts);
    }
    return out;
  }

  /** The list `list()` asks this socket for; rejects when the socket does not answer. */
  async listFlavour(deadlineSeconds: number): Promise<ListFlavour> {
    return (await this.#listRoute(deadlineSeconds * 1000)).flavour;
  }

  #listRoute(timeoutMs: number): Promise<ListRoute> {
    if (this.#pinned === "docker") return Promise.resolve(DOCKER_LIST);
    if (this.#route === undefined) {
      const route = this.#detect(timeoutMs);
      this.#route = route;
      route.catch(() => {
        if (this.#route === route) this.#route = undefined;
      });
    }
    return this.#route;
  }

  async #detect(timeoutMs: number): Promise<ListRoute> {
    const ping = await this.#get("/_ping", timeoutMs);
    const version = ping.headers["libpod-api-version"];
    if (ping.status === 200 && typeof version === "string" && /^\d+(\.\d+)*$/.test(version)) {
      return libpodList(version);
    }
    if (this.#pinned === "libpod") throw new Error(`${this.socketPath} is not podman's API`);
    return DOCKER_LIST;
  }

  /**
   * An engine restarted, or replaced by another at the same path, closes the
   * connections it had: what was learnt about it is forgotten with them.
   */
  #watch(socket: Socket): void {
    if (this.#watched.has(socket)) return;
    this.#watched.add(socket);
    socket.once("close", () => {
      this.#route = undefined;
    });
  }

  close(): void {
    this.#agent.destroy();
  }

  /** One GET on the socket (the container view's event catch-up); rejects when the socket does not answer. */
  get(path: string, timeoutMs: number): Promise<ApiAnswer> {
    return this.#get(path, timeoutMs);
  }

  /**
   * A GET whose answer streams for as long as the engine keeps it open (`/events`):
   * on a connection of its own, not one of the keep-alive ones the inspects share,
   * and one that never keeps the process alive. Resolves once the status line came.
   */
  stream(path: string, timeoutMs: number): Promise<{ res: http.IncomingMessage; close: () => void }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ socketPath: this.socketPath, path, method: "GET", agent: false });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on("socket", (s: Socket) => s.unref());
      req.on("response", (res) => {
        clearTimeout(timer);
        resolve({ res, close: () => req.destroy() });
      });
      req.on("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end();
    });
  }

  /**
   * One call, with a JSON body or none (the deploy's create, start, remove, list: api-engine.ts);
   * rejects when the socket does not answer.
   */
  send(
    method: "GET" | "POST" | "DELETE",
    path: string,
    timeoutMs: number,
    body?: unknown,
  ): Promise<ApiAnswer> {
    return this.#get(path, timeoutMs, method, body === undefined ? undefined : JSON.stringify(body));
  }

  #get(path: string, timeoutMs: number, method = "GET", body?: string): Promise<ApiAnswer> {
    return new Promise((resolve, reject) => {
      const headers = body === undefined ? {} : { "content-type": "application/json" };
      const req = http.request(
        { socketPath: this.socketPath, path, method, headers, agent: this.#agent, timeout: timeoutMs },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString("utf8"),
            }),
          );
        },
      );
      req.on("socket", (s: Socket) => this.#watch(s));
      req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on("error", reject);
      req.end(body);
    });
  }
}

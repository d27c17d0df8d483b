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
import http from "node:http";
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

interface ApiAnswer {
  status: number;
  body: string;
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

/** One entry of a container list as facts: names, state and published TCP bindings. */
function listedFacts(item: unknown): ContainerFacts | undefined {
  const c = obj(item);
  const first = Array.isArray(c.Names) ? c.Names[0] : undefined;
  if (typeof first !== "string") return undefined;
  const ports = new Map<number, PortBinding[]>();
  for (const p of Array.isArray(c.Ports) ? c.Ports.map(obj) : []) {
    const port = Number(p.PrivatePort);
    const hostPort = Number(p.PublicPort);
    if (p.Type !== "tcp" || !Number.isInteger(port) || !Number.isInteger(hostPort) || hostPort < 1) continue;
    ports.set(port, [...(ports.get(port) ?? []), { hostIp: String(p.IP ?? ""), hostPort }]);
  }
  const state = typeof c.State === "string" ? c.State : "unknown";
  return {
    name: first.replace(/^\//, ""),
    running: state === "running",
    status: state,
    networkMode: String(obj(c.HostConfig).NetworkMode ?? ""),
    ports,
  };
}

export class EngineApi {
  readonly #agent = new http.Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });

  constructor(
    /** `docker` or `podman`, for messages. */
    readonly name: string,
    readonly socketPath: string,
  ) {}

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
      else if (a.status === 404) stderr.push(`Error: no such container ${name}`);
      else {
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
   * Every container as `GET /containers/json?all=true` lists it (one call, ~15 ms
   * for 100 containers with podman, against ~1 ms per inspect that podman serves
   * one at a time). The list shows names, state and published ports only: not the
   * ports a container exposes without publishing them, and (podman) not its
   * network mode, so only a published binding read here is as good as an
   * inspect. Undefined when the socket does not answer.
   */
  async list(deadlineSeconds: number): Promise<Map<string, ContainerFacts> | undefined> {
    let answer: ApiAnswer;
    try {
      answer = await this.#get("/containers/json?all=true", deadlineSeconds * 1000);
    } catch {
      return undefined;
    }
    const doc = answer.status === 200 ? parseJson(answer.body) : undefined;
    if (!Array.isArray(doc)) return undefined;
    const out = new Map<string, ContainerFacts>();
    for (const item of doc) {
      const facts = listedFacts(item);
      if (facts) out.set(facts.name, facts);
    }
    return out;
  }

  close(): void {
    this.#agent.destroy();
  }

  #get(path: string, timeoutMs: number): Promise<ApiAnswer> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        { socketPath: this.socketPath, path, method: "GET", agent: this.#agent, timeout: timeoutMs },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", reject);
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
          );
        },
      );
      req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on("error", reject);
      req.end();
    });
  }
}

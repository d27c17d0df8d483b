// The deployment's engine calls through the engine's API socket where there is
// one (issue 34, goal 4): `run` as the compatible API's create and start, `rm -f`
// as a forced DELETE, `container inspect` as engine-api.ts's, `ps -a --filter
// label=k=v` as the compatible list with the same filter, `image inspect` of an
// image's id as the compatible image inspect. Starting the CLI
// costs 0.1–0.45 s a call on these machines (engine-api.ts); the socket's
// engine does the same work without it. Everything else, and any of these when
// the socket does not answer, is the CLI's, as before.
//
// What a run sets is the CLI's `run` of cli-args.ts, field for field: labels,
// the container port published on a free port of 127.0.0.1 (HostPort ""),
// --init (HostConfig.Init), the restart policy, the network, memory and CPU
// limits (Memory, NanoCpus). The env values go in the create body, to the
// engine only: never argv, never a file; the same names and one-line values
// the env file takes (runCall validates them), so the two paths refuse alike.
import { runCall } from "./cli-args.js";
import { scrub } from "./cli-process.js";
import type { ApiAnswer, EngineApi } from "./engine-api.js";
import {
  type CallOptions,
  type ContainerEngine,
  type EngineOutcome,
  type RunSpec,
  imageIdOf,
} from "./engine.js";

/** The compatible API's create body of a RunSpec. */
export function createBody(spec: RunSpec): Record<string, unknown> {
  const port = `${spec.containerPort}/tcp`;
  const host: Record<string, unknown> = {
    PortBindings: { [port]: [{ HostIp: "127.0.0.1", HostPort: "" }] },
  };
  if (spec.init) host.Init = true;
  if (spec.restartPolicy) host.RestartPolicy = { Name: spec.restartPolicy };
  if (spec.network) host.NetworkMode = spec.network;
  if (spec.memoryBytes) host.Memory = Math.floor(spec.memoryBytes);
  if (spec.cpuMillis) host.NanoCpus = Math.round(spec.cpuMillis * 1_000_000);
  return {
    Image: spec.image,
    Labels: spec.labels,
    Env: Object.keys(spec.env)
      .sort()
      .map((k) => `${k}=${spec.env[k]}`),
    ExposedPorts: { [port]: {} },
    HostConfig: host,
  };
}

/** The engine's message in an API error body (`{"message": ...}`), else the body. */
function apiMessage(a: ApiAnswer): string {
  try {
    const m = (JSON.parse(a.body) as { message?: unknown }).message;
    if (typeof m === "string") return m;
  } catch {}
  return a.body.trim().slice(0, 500) || `HTTP ${a.status}`;
}

const ok = (a: ApiAnswer) => a.status >= 200 && a.status < 300;

/** The CLI engine with run, remove, inspect, list and image id through the API socket when it answers. */
export function withEngineApi(cli: ContainerEngine, api: EngineApi): ContainerEngine {
  const outcome = (started: number, exitCode: number, stdout: string, stderr: string): EngineOutcome => ({
    status: "completed",
    exitCode,
    stdout,
    stderr,
    durationMs: Date.now() - started,
  });

  async function run(spec: RunSpec, opts: CallOptions): Promise<EngineOutcome> {
    const started = Date.now();
    try {
      runCall(spec, "");
    } catch (err) {
      return { ...outcome(started, -1, "", ""), status: "failed", error: (err as Error).message };
    }
    const ms = opts.deadlineSeconds * 1000;
    const name = encodeURIComponent(spec.name);
    let created: ApiAnswer;
    try {
      created = await api.send("POST", `/containers/create?name=${name}`, ms, createBody(spec));
    } catch {
      return cli.run(spec, opts);
    }
    // Nothing exists when the create fails: the CLI runs it as it always did, and says why in its words.
    if (!ok(created)) return cli.run(spec, opts);
    const id = String((JSON.parse(created.body) as { Id?: unknown }).Id ?? spec.name);
    let why: string;
    try {
      const start = await api.send("POST", `/containers/${encodeURIComponent(id)}/start`, ms);
      if (ok(start) || start.status === 304) return outcome(started, 0, `${id}\n`, "");
      why = apiMessage(start);
    } catch (err) {
      why = `${api.name} API socket ${api.socketPath}: ${(err as Error).message}`;
    }
    // As `run` leaves nothing running that did not start: the created container goes (best effort).
    await api.send("DELETE", `/containers/${encodeURIComponent(id)}?force=true`, ms).catch(() => undefined);
    const secrets = [...(opts.secrets ?? []), ...Object.values(spec.env)];
    return outcome(started, 125, "", `Error: ${scrub(why, secrets)}\n`);
  }

  async function remove(containerName: string, opts: CallOptions): Promise<EngineOutcome> {
    const started = Date.now();
    const path = `/containers/${encodeURIComponent(containerName)}?force=true`;
    let a: ApiAnswer;
    try {
      a = await api.send("DELETE", path, opts.deadlineSeconds * 1000);
    } catch {
      return cli.remove(containerName, opts);
    }
    if (ok(a)) return outcome(started, 0, `${containerName}\n`, "");
    if (a.status === 404) return outcome(started, 1, "", `Error: no such container ${containerName}\n`);
    return cli.remove(containerName, opts);
  }

  async function inspect(containerNames: string[], deadlineSeconds: number): Promise<EngineOutcome> {
    const o = await api.inspect(containerNames, deadlineSeconds);
    return o.status === "failed" ? cli.inspect(containerNames, deadlineSeconds) : o;
  }

  async function containersByLabel(key: string, value: string, opts: CallOptions): Promise<EngineOutcome> {
    const started = Date.now();
    const filters = encodeURIComponent(JSON.stringify({ label: [`${key}=${value}`] }));
    try {
      const a = await api.send(
        "GET",
        `/containers/json?all=true&filters=${filters}`,
        opts.deadlineSeconds * 1000,
      );
      const doc = ok(a) ? (JSON.parse(a.body) as { Names?: unknown }[]) : undefined;
      if (Array.isArray(doc)) {
        // The CLI's `{{.Names}}`: each container's first name, without the API's leading "/".
        const names = doc.map((c) =>
          (Array.isArray(c.Names) ? String(c.Names[0] ?? "") : "").replace(/^\//, ""),
        );
        return outcome(
          started,
          0,
          names
            .filter(Boolean)
            .map((n) => `${n}\n`)
            .join(""),
          "",
        );
      }
    } catch {}
    return cli.containersByLabel(key, value, opts);
  }

  /**
   * `image inspect --format {{.Id}}`: a rollback asks it before anything else (is the release's
   * image still here?), and a deploy beside its fetch (is this commit built already?). The CLI
   * took 0.3-0.56 s for it on the slow-fork machine, most of a rollback's "build" step.
   */
  async function imageId(image: string, opts: CallOptions): Promise<EngineOutcome> {
    const started = Date.now();
    try {
      // encodeURI keeps the reference's "/" and ":" as the CLIs send them (both engines route
      // /images/{name}/json on the raw path); the callers' references are validated already.
      const a = await api.send("GET", `/images/${encodeURI(image)}/json`, opts.deadlineSeconds * 1000);
      if (a.status === 404) return outcome(started, 1, "", `Error: ${apiMessage(a)}\n`);
      const id = ok(a) ? (JSON.parse(a.body) as { Id?: unknown }).Id : undefined;
      if (typeof id === "string" && imageIdOf(id) !== undefined) return outcome(started, 0, `${id}\n`, "");
    } catch {}
    return cli.imageId(image, opts);
  }

  // The CLI engine's other methods, bound to it (its private fields need `this`).
  return new Proxy(cli, {
    get(target, prop) {
      if (prop === "run") return run;
      if (prop === "remove") return remove;
      if (prop === "inspect") return inspect;
      if (prop === "containersByLabel") return containersByLabel;
      if (prop === "imageId") return imageId;
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

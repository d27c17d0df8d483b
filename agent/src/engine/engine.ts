// The ContainerEngine port: what the job layer asks of the machine's container
// engine. Adapters are named by technology (docker-engine.ts, podman-engine.ts);
// select.ts picks one from the agent's RELAYCTL_AGENT_CONTAINER_ENGINE setting.
// Every method runs the engine's CLI with an argv (never through a shell) and may
// be called at any time, concurrently; none of them throws for a non-zero exit.

export interface EngineOutcome {
  /** completed: the CLI ran and exited; failed: it could not start; timeout: killed at the deadline. */
  status: "completed" | "failed" | "timeout";
  /** The CLI's exit code; -1 when it never ran. */
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** Human reason for failed and timeout. */
  error?: string;
}

export interface RegistryLogin {
  registry: string;
  username: string;
  /** Written to the CLI's stdin only; scrubbed from its output. */
  password: string;
}

/** Options of the deployment calls: a deadline, the job's abort signal and secrets. */
export interface CallOptions {
  deadlineSeconds: number;
  /** Kills the CLI when the job's own deadline passes. */
  signal?: AbortSignal;
  /** Values scrubbed from the CLI's output. */
  secrets?: string[];
  /** The CLI's output as it comes, scrubbed, with the stream it came on (cli-process.ts onOutput). */
  onOutput?: (text: string, stream?: "stdout" | "stderr") => void;
}

/** What `<engine> logs` reads (jobs/logs.ts). */
export interface LogsRead {
  /** `--tail`: lines from the end. */
  tail: number;
  /** `--since`: an RFC 3339 time or a duration (10m); undefined for the whole log. */
  since?: string;
  /** `-f`: go on until opts.signal or the deadline. */
  follow: boolean;
}

/** A logs call's options: its output goes to onOutput by stream, scrubbed, and is not kept. */
export interface LogsCallOptions extends Omit<CallOptions, "onOutput"> {
  onOutput: (text: string, stream: "stdout" | "stderr") => void;
  /** Text the scrubber holds back is released after this much quiet (cli-process.ts). */
  flushAfterMs: number;
}

export interface BuildSpec {
  /** Build context directory (absolute). */
  contextDir: string;
  /** Dockerfile path (absolute, inside the context's repository). */
  dockerfile: string;
  tag: string;
  /** `--iidfile`: where the engine writes the built image's id (no inspect after the build). */
  iidFile?: string;
}

export interface RunSpec {
  name: string;
  image: string;
  labels: Record<string, string>;
  /**
   * `-p 127.0.0.1::<containerPort>`: published on a free host port the engine picks
   * (read it back with inspect), so no port is chosen before the engine binds it.
   */
  containerPort: number;
  /** `--init`: a tiny init as PID 1 forwards SIGTERM, so a stop is quick. */
  init: boolean;
  /** Network the container joins (container-network upstream mode). */
  network?: string;
  /**
   * The container's variables, handed to the container only: an env file
   * (`--env-file`, cli-args.ts), never argv or the CLI's own environment.
   */
  env: Record<string, string>;
  /**
   * `--restart <policy>`: who brings a crashed app back (start-step.ts says why
   * unless-stopped). Absent: the engine's default, no restart.
   */
  restartPolicy?: "unless-stopped";
  /** `--memory <bytes>b`: the container's memory limit (a preview's); absent or 0: none. */
  memoryBytes?: number;
  /** `--cpus <n>`, from thousandths of a CPU; absent or 0: none. */
  cpuMillis?: number;
}

export interface ContainerEngine {
  /** `docker` or `podman`. */
  readonly name: string;
  restart(containerName: string, deadlineSeconds: number): Promise<EngineOutcome>;
  login(login: RegistryLogin, deadlineSeconds: number): Promise<EngineOutcome>;
  logout(registry: string, deadlineSeconds: number): Promise<EngineOutcome>;
  /**
   * `<engine> container inspect <name>...`: a JSON array on stdout of the containers
   * found (container-facts.ts reads it); a non-zero exit when any name is missing.
   */
  inspect(containerNames: string[], deadlineSeconds: number): Promise<EngineOutcome>;
  /**
   * Names of the running containers of a compose service (label
   * com.docker.compose.service=<service>), one per line on stdout.
   */
  composeServiceContainers(service: string, deadlineSeconds: number): Promise<EngineOutcome>;
  /** Builds and tags an image with the engine's own registry credentials. */
  build(spec: BuildSpec, opts: CallOptions): Promise<EngineOutcome>;
  /**
   * Pulls an image; with `auth`, through a login into a temporary auth file of
   * this call only (on tmpfs when there is one, 0600, removed after), so the
   * credential never joins the engine's default one. Login output is part of
   * the outcome.
   */
  pull(image: string, auth: RegistryLogin | undefined, opts: CallOptions): Promise<EngineOutcome>;
  /** `run -d`: the container's id on stdout. */
  run(spec: RunSpec, opts: CallOptions): Promise<EngineOutcome>;
  stop(containerName: string, graceSeconds: number, opts: CallOptions): Promise<EngineOutcome>;
  /** `rm -f`: stops (SIGKILL) and removes. */
  remove(containerName: string, opts: CallOptions): Promise<EngineOutcome>;
  /** `start <name>`: a stopped container runs again (the agent's start at boot, containers/boot-start.ts). */
  start(containerName: string, opts: CallOptions): Promise<EngineOutcome>;
  /** Names of all containers (running or not) carrying label `key` (any value), one per line. */
  containersWithLabel(key: string, opts: CallOptions): Promise<EngineOutcome>;
  /** Names of all containers (running or not) carrying label `key=value`, one per line. */
  containersByLabel(key: string, value: string, opts: CallOptions): Promise<EngineOutcome>;
  /** The last `lines` lines of a container's output (stdout and stderr of the CLI). */
  logsTail(containerName: string, lines: number, opts: CallOptions): Promise<EngineOutcome>;
  /**
   * `logs --tail <n> [--since <t>] [-f] <name>`: the container's stdout and
   * stderr as the CLI prints them, each to opts.onOutput with its stream; the
   * outcome keeps none of it. The caller validates the name and `since`.
   */
  logs(containerName: string, read: LogsRead, opts: LogsCallOptions): Promise<EngineOutcome>;
  removeImage(image: string, opts: CallOptions): Promise<EngineOutcome>;
  /**
   * `<full id> <repository:tag>` of every image, newest first, one per line (an
   * image tagged twice is listed twice; `<none>:<none>` when untagged). Ids as
   * the CLI prints them: normalize with imageIdOf().
   */
  imageList(opts: CallOptions): Promise<EngineOutcome>;
  /** `image inspect`: the image's id on stdout (docker `sha256:<hex>`, podman bare hex). */
  imageId(image: string, opts: CallOptions): Promise<EngineOutcome>;
}

/**
 * podman's shared image store answers a read or a build that meets an image
 * another process is removing at that moment (another application's retire or
 * cleanup) with one of these: a race of the store, worth another try.
 */
export const STORE_RACE = /layer not known|image not known|identifier is not a layer/;

/** An image id as both CLIs may print it, as `sha256:<hex>`; undefined when it is not one. */
export function imageIdOf(text: string): string | undefined {
  const m = /^(?:sha256:)?([0-9a-f]{64})$/.exec(text.trim());
  return m ? `sha256:${m[1]}` : undefined;
}

/** A variable's name as the env file takes it: a name with "=" in it would shift its value. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Docker's rule for container names (daemon/names.RestrictedNamePattern), at most 255 long. */
export const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
export const CONTAINER_NAME_MAX = 255;

export function validContainerName(name: string): boolean {
  return name.length <= CONTAINER_NAME_MAX && CONTAINER_NAME.test(name);
}

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
}

/** Docker's rule for container names (daemon/names.RestrictedNamePattern), at most 255 long. */
export const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;
export const CONTAINER_NAME_MAX = 255;

export function validContainerName(name: string): boolean {
  return name.length <= CONTAINER_NAME_MAX && CONTAINER_NAME.test(name);
}

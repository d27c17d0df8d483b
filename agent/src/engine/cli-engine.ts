// The part docker and podman share: both CLIs take the same restart, login
// (--password-stdin), logout, container inspect and ps --filter/--format
// arguments. An adapter only names its binary.
import { runCli } from "./cli-process.js";
import type { ContainerEngine, EngineOutcome, RegistryLogin } from "./engine.js";

export class CliEngine implements ContainerEngine {
  constructor(
    readonly name: string,
    /** The executable, looked up on PATH when not absolute. */
    readonly binary: string = name,
  ) {}

  restart(containerName: string, deadlineSeconds: number): Promise<EngineOutcome> {
    // Names start with a letter or digit (validContainerName), so none reads as a flag.
    return runCli({ binary: this.binary, args: ["restart", containerName], deadlineSeconds });
  }

  login(login: RegistryLogin, deadlineSeconds: number): Promise<EngineOutcome> {
    return runCli({
      binary: this.binary,
      args: ["login", login.registry, "-u", login.username, "--password-stdin"],
      stdin: login.password,
      deadlineSeconds,
      secrets: [login.password],
    });
  }

  logout(registry: string, deadlineSeconds: number): Promise<EngineOutcome> {
    return runCli({ binary: this.binary, args: ["logout", registry], deadlineSeconds });
  }

  inspect(containerNames: string[], deadlineSeconds: number): Promise<EngineOutcome> {
    // `container inspect`, not `inspect`: an image of the same name must not answer.
    return runCli({
      binary: this.binary,
      args: ["container", "inspect", ...containerNames],
      deadlineSeconds,
    });
  }

  composeServiceContainers(service: string, deadlineSeconds: number): Promise<EngineOutcome> {
    const filter = `label=com.docker.compose.service=${service}`;
    return runCli({
      binary: this.binary,
      args: ["ps", "--filter", filter, "--format", "{{.Names}}"],
      deadlineSeconds,
    });
  }
}

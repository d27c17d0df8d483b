// Docker adapter of the ContainerEngine port (the `docker` CLI). A temporary
// registry login lives in a config dir of its own: DOCKER_CONFIG=<dir>.
import { type AuthUse, CliEngine } from "./cli-engine.js";

export class DockerEngine extends CliEngine {
  constructor(binary = "docker") {
    super("docker", binary);
  }

  protected authFor(dir: string): AuthUse {
    return { args: [], env: { DOCKER_CONFIG: dir } };
  }
}

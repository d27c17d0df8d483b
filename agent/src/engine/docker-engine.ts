// Docker adapter of the ContainerEngine port (the `docker` CLI).
import { CliEngine } from "./cli-engine.js";

export class DockerEngine extends CliEngine {
  constructor(binary = "docker") {
    super("docker", binary);
  }
}

// Podman adapter of the ContainerEngine port: its CLI takes docker's arguments
// for restart, login --password-stdin and logout.
import { CliEngine } from "./cli-engine.js";

export class PodmanEngine extends CliEngine {
  constructor(binary = "podman") {
    super("podman", binary);
  }
}

// Podman adapter of the ContainerEngine port: its CLI takes docker's arguments
// for everything the agent runs, except that a temporary registry login is a
// file named with --authfile (podman writes it 0600).
import { join } from "node:path";
import { type AuthUse, CliEngine } from "./cli-engine.js";

export class PodmanEngine extends CliEngine {
  constructor(binary = "podman") {
    super("podman", binary);
  }

  protected authFor(dir: string): AuthUse {
    return { args: ["--authfile", join(dir, "auth.json")], env: {} };
  }
}

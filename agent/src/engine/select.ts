// Picks the ContainerEngine adapter from the agent setting
// RELAYCTL_AGENT_CONTAINER_ENGINE: docker, podman, or auto (docker when a `docker`
// executable is on PATH, else podman). auto is resolved at each job, so an engine
// installed after the agent started is found without a restart.
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { DockerEngine } from "./docker-engine.js";
import type { ContainerEngine } from "./engine.js";
import { PodmanEngine } from "./podman-engine.js";

export type EngineSetting = "docker" | "podman" | "auto";

export function onPath(binary: string, path = process.env.PATH ?? ""): boolean {
  return path
    .split(delimiter)
    .filter(Boolean)
    .some((dir) => {
      try {
        accessSync(join(dir, binary), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
}

export function selectEngine(setting: EngineSetting, path?: string): ContainerEngine {
  if (setting === "docker") return new DockerEngine();
  if (setting === "podman") return new PodmanEngine();
  return onPath("docker", path) ? new DockerEngine() : new PodmanEngine();
}

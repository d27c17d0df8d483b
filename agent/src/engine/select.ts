// The agent setting RELAYCTL_AGENT_CONTAINER_ENGINE (docker, podman or auto) and
// the adapter it names without asking the engine: the agent itself decides by
// probing (engine-monitor.ts, choice.ts); this static pick is for callers that
// run one fixed engine (tests, tools) and for a port check before the first
// probe has ended (docker when its CLI is on PATH, else podman).
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

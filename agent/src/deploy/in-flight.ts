// The containers a deployment has started and not yet switched to or removed. The
// watcher's restarts of crashed containers (containers/crash-hold.ts, podman) leave
// these alone: a new release that crashes before it answers fails its health check
// at once, as it did when the engine's count of restarts said so, instead of being
// brought back under the check. One agent process runs one deployer and one
// watcher, so this is the process's own set.
const started = new Set<string>();

export const inFlightContainers = {
  add(name: string): void {
    started.add(name);
  },
  delete(name: string): void {
    started.delete(name);
  },
  has(name: string): boolean {
    return started.has(name);
  },
};

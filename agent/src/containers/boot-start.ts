// After a reboot, the live release comes back: docker's daemon starts its
// unless-stopped containers itself, podman has no daemon (that is its
// podman-restart.service, a systemd unit this agent does not require). So on the
// agent's first look at its containers after a boot (a boot id other than the
// one it recorded), it starts each application's live container that is not
// running (with podman's restart policy, or none: the agent restarts those,
// containers/crash-hold.ts). One consequence, as
// documented in docs/deploying.md: a container stopped by hand before a reboot
// runs again after it (relayctl's way to stop an application is to delete it).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { ContainerEngine } from "../engine/engine.js";
import type { Logger } from "../log.js";
import { writeFileAtomic } from "@relayctl/reverse-proxy-sync";
import { type ContainerRuntime, liveContainers } from "./runtime.js";

const FILE = "containers-boot-id";

export interface BootStartOptions {
  stateDir: string;
  /** This boot's id (host-info.ts bootId). */
  bootId: string;
  log: Logger;
}

/** The watcher's onFirstLook: true when it started something (the watcher looks again). */
export function bootStart(o: BootStartOptions) {
  return async (engine: ContainerEngine, all: ContainerRuntime[]): Promise<boolean> => {
    const file = join(o.stateDir, FILE);
    const recorded = (await readFile(file, "utf8").catch(() => "")).trim();
    // No record yet: a fresh agent; there is no boot "before" to come back from.
    const rebooted = recorded !== "" && o.bootId !== "" && recorded !== o.bootId;
    let started = false;
    if (rebooted && engine.name === "podman") {
      for (const c of liveContainers(all).values()) {
        if (c.status === "running") continue;
        const out = await engine.start(c.name, { deadlineSeconds: 60 });
        const ok = out.status === "completed" && out.exitCode === 0;
        const fields = { container: c.name, application_id: c.applicationId };
        if (ok) o.log.info(fields, "live container started after a reboot");
        else
          o.log.error({ ...fields, stderr: out.stderr.trim() }, "cannot start live container after a reboot");
        started ||= ok;
      }
    }
    if (o.bootId !== "" && recorded !== o.bootId) await writeFileAtomic(file, `${o.bootId}\n`, 0o600);
    return started;
  };
}

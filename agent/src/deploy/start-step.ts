// The start step: the new container beside the old one, published on a host port of
// 127.0.0.1 that the engine picks (`-p 127.0.0.1::<container port>`) and the step reads
// back with `container inspect`. The agent chooses no port itself: a port found free here
// and handed to the engine could be taken by another process before the engine binds it.
// The application's env reaches the container only: the create request's body when the
// engine's API socket answers (engine/api-engine.ts), else an env file (engine/cli-args.ts);
// never argv and never the engine CLI's own environment.
//
// Restart policy. Docker: `--restart unless-stopped`, so a crashed app comes back without
// the agent (issue 29); its daemon restarts it with its own back-off, and starts it again
// after a reboot. Podman has no daemon: its policy is applied by `podman container cleanup`,
// which conmon runs when the container exits, at once and for ever. Measured here (podman
// 4.3.1, CNI): a container it restarted no longer holds its published port (conmon binds it
// at `podman start` only), and a stop that lands between a crash and the restart leaves the
// container "stopped" with its DNAT rules in place. Another process then given that port is
// cut off from it: its connections go to the dead container's address (a CI run's api and a
// deployed app's health check were refused so). So on podman the agent restarts crashed
// containers itself (containers/crash-hold.ts): the container runs with no policy, a crash
// exits it cleanly (rules removed), and `podman start` binds its port again. With the
// container watcher off (RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS=0), podman's policy stays.
// Podman cannot do the reboot either without its podman-restart.service (systemd), so the
// agent starts the live containers itself when it starts after a boot (containers/boot-start.ts).
import { parseInspect } from "../engine/container-facts.js";
import { type DeployContext, StepError, callOptions, check, outputOf } from "./context.js";
import { deployLabels } from "./naming.js";

/**
 * Runs when the engine's own pick was taken before it bound it: podman 4 picks by binding
 * port 0 and closing it before the container starts, so "address already in use" stays
 * possible there (docker's daemon allocates from its own table); a new run picks again.
 */
const PORT_TRIES = 3;

/** Starts the container; returns the host port it is published on. */
export async function startContainer(ctx: DeployContext, name: string, image: string): Promise<number> {
  const { job, engine, rec } = ctx;
  if (!Number.isInteger(job.containerPort) || job.containerPort < 1 || job.containerPort > 65535) {
    throw new StepError(`invalid container port ${job.containerPort}`);
  }
  for (let attempt = 1; ; attempt++) {
    rec.log("start", `starting ${name} from ${image}, 127.0.0.1:<free port> -> ${job.containerPort}`);
    const o = await engine.run(
      {
        name,
        image,
        labels: deployLabels(job.applicationId, job.deploymentId, ctx.settings.serverId),
        containerPort: job.containerPort,
        init: ctx.settings.init,
        network: ctx.settings.network,
        env: job.env,
        restartPolicy: engine.name === "podman" && ctx.settings.agentRestarts ? undefined : "unless-stopped",
        // A preview's limits (previews/settings.ts): an engine that refuses them fails the step in its words.
        memoryBytes: job.limits?.memoryBytes ?? 0,
        cpuMillis: job.limits?.cpuMillis ?? 0,
      },
      callOptions(ctx),
    );
    rec.log("start", outputOf(o));
    const taken = /address already in use/i.test(o.stderr);
    if (taken && attempt < PORT_TRIES && !ctx.signal.aborted) {
      await engine.remove(name, callOptions(ctx));
      continue;
    }
    check(o, `${engine.name} run`);
    return publishedPort(ctx, name);
  }
}

/** The host port the engine published the container's port on, from `container inspect`. */
async function publishedPort(ctx: DeployContext, name: string): Promise<number> {
  const { job, engine, rec } = ctx;
  const o = check(
    await engine.inspect([name], callOptions(ctx).deadlineSeconds),
    `${engine.name} container inspect`,
  );
  const bindings = parseInspect(o.stdout).get(name)?.ports.get(job.containerPort) ?? [];
  const binding = bindings.find((b) => b.hostIp === "127.0.0.1") ?? bindings[0];
  if (!binding) throw new StepError(`${engine.name} published no host port for ${job.containerPort}/tcp`);
  rec.log("start", `${name}: 127.0.0.1:${binding.hostPort} -> ${job.containerPort}`);
  return binding.hostPort;
}

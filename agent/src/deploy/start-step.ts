// The start step: the new container beside the old one, published on a host port of
// 127.0.0.1 that the engine picks (`-p 127.0.0.1::<container port>`) and the step reads
// back with `container inspect`. The agent chooses no port itself: a port found free here
// and handed to the engine could be taken by another process before the engine binds it.
// The application's env: names on argv, values only in the engine CLI's environment
// (engine/cli-args.ts).
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
        labels: deployLabels(job.applicationId, job.deploymentId),
        containerPort: job.containerPort,
        init: ctx.settings.init,
        network: ctx.settings.network,
        env: job.env,
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

// The start step: the new container beside the old one, on a free host port of
// 127.0.0.1, with the application's env (names on argv, values only in the
// engine CLI's environment: engine/cli-args.ts).
import { createServer } from "node:net";
import { type DeployContext, StepError, callOptions, check, outputOf } from "./context.js";
import { deployLabels } from "./naming.js";

/** Tries when the free port was taken between finding it and the engine binding it. */
const PORT_TRIES = 3;

export function freeHostPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error("no port from listen(0)"))));
    });
  });
}

/** Starts the container; returns the host port it is published on. */
export async function startContainer(ctx: DeployContext, name: string, image: string): Promise<number> {
  const { job, engine, rec } = ctx;
  if (!Number.isInteger(job.containerPort) || job.containerPort < 1 || job.containerPort > 65535) {
    throw new StepError(`invalid container port ${job.containerPort}`);
  }
  for (let attempt = 1; ; attempt++) {
    const hostPort = await freeHostPort();
    rec.log("start", `starting ${name} from ${image}, 127.0.0.1:${hostPort} -> ${job.containerPort}`);
    const o = await engine.run(
      {
        name,
        image,
        labels: deployLabels(job.applicationId, job.deploymentId),
        hostPort,
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
    return hostPort;
  }
}

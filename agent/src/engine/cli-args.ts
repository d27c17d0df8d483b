// The argv of the deployment calls, shared by docker and podman (same flags).
// Pure, so a test can prove what reaches argv: container env values never do,
// only their names (`--env NAME` makes the CLI copy the value from its own
// environment, where the caller puts it).
import { type BuildSpec, ENV_NAME, type RunSpec } from "./engine.js";

function labelArgs(labels: Record<string, string>): string[] {
  return Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
}

/** `run -d ...`; throws on an env name that could smuggle a value onto argv. */
export function runArgs(spec: RunSpec): string[] {
  const bad = Object.keys(spec.env).find((name) => !ENV_NAME.test(name));
  if (bad !== undefined) throw new Error(`invalid environment variable name '${bad.slice(0, 100)}'`);
  const args = ["run", "-d", "--name", spec.name, ...labelArgs(spec.labels)];
  args.push("-p", `127.0.0.1:${spec.hostPort}:${spec.containerPort}`);
  if (spec.init) args.push("--init");
  if (spec.network) args.push("--network", spec.network);
  for (const name of Object.keys(spec.env).sort()) args.push("--env", name);
  // `--` is not needed: the image reference is validated by the caller and never starts with "-".
  args.push(spec.image);
  return args;
}

/** The environment of the `run` CLI: exactly the container's variables, values included. */
export function runEnv(spec: RunSpec): Record<string, string> {
  return { ...spec.env };
}

export function buildArgs(spec: BuildSpec): string[] {
  return ["build", "-f", spec.dockerfile, "-t", spec.tag, ...labelArgs(spec.labels), spec.contextDir];
}

// The argv of the deployment calls, shared by docker and podman (same flags).
// Pure, so a test can prove what reaches argv: container env values never do.
// The container's env reaches the container only: every variable goes through
// `--env-file`, a file of mode 0600 in a private 0700 dir (tmpfs when there is
// one: /dev/shm) removed as soon as the CLI returned. Never through the CLI's own
// environment (`--env NAME`): the engine client reads variables there itself
// (HTTP(S)_PROXY, OTEL_*, REGISTRIES_CONFIG_PATH, DBUS_SESSION_BUS_ADDRESS,
// PATH, LD_PRELOAD, DOCKER_HOST...), and no deny-list of them can be complete
// (issue 30, finding 13). Both CLIs read the file themselves (client side), one
// `NAME=value` a line, so a value must be one line.
import { type BuildSpec, ENV_NAME, type RunSpec } from "./engine.js";

function labelArgs(labels: Record<string, string>): string[] {
  return Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
}

export interface RunCall {
  args: string[];
  /** env-file lines of the container's variables, values included, or undefined when there are none. */
  envFile: string | undefined;
}

/**
 * `run -d ...`; throws on a name or value that cannot be passed in an env file.
 * `envFilePath` is where the caller writes `envFile` when there is one.
 */
export function runCall(spec: RunSpec, envFilePath: string): RunCall {
  const fileLines: string[] = [];
  for (const name of Object.keys(spec.env).sort()) {
    const value = spec.env[name]!;
    if (!ENV_NAME.test(name)) throw new Error(`invalid environment variable name '${name.slice(0, 100)}'`);
    if (value.includes("\0")) throw new Error(`environment variable ${name} holds a NUL character`);
    if (/[\r\n]/.test(value)) {
      throw new Error(
        `environment variable ${name} must be one line (the engine reads the container's env from an env file)`,
      );
    }
    fileLines.push(`${name}=${value}\n`);
  }
  const envFile = fileLines.length > 0 ? fileLines.join("") : undefined;
  return { args: runArgs(spec, envFile ? envFilePath : undefined), envFile };
}

function runArgs(spec: RunSpec, envFile: string | undefined): string[] {
  const args = ["run", "-d", "--name", spec.name, ...labelArgs(spec.labels)];
  args.push("-p", `127.0.0.1::${spec.containerPort}`);
  if (spec.init) args.push("--init");
  if (spec.restartPolicy) args.push("--restart", spec.restartPolicy);
  if (spec.network) args.push("--network", spec.network);
  if (spec.memoryBytes) args.push("--memory", `${Math.floor(spec.memoryBytes)}b`);
  if (spec.cpuMillis) args.push("--cpus", (spec.cpuMillis / 1000).toFixed(3));
  if (envFile) args.push("--env-file", envFile);
  // `--` is not needed: the image reference is validated by the caller and never starts with "-".
  args.push(spec.image);
  return args;
}

export function buildArgs(spec: BuildSpec): string[] {
  const iid = spec.iidFile ? ["--iidfile", spec.iidFile] : [];
  // No --label: image-ledger.ts says why a build carries none.
  return ["build", "-f", spec.dockerfile, "-t", spec.tag, ...iid, spec.contextDir];
}

// The argv of the deployment calls, shared by docker and podman (same flags).
// Pure, so a test can prove what reaches argv: container env values never do,
// only their names. `--env NAME` makes the CLI copy the value from its own
// environment, where runCall puts it. A variable the engine CLI itself reads
// (PATH: podman finds iptables and conmon through it; LD_PRELOAD; DOCKER_HOST...)
// cannot travel that way without changing what the CLI does, so those go
// through `--env-file` in memory (tmpfs: /dev/shm), a file of mode 0600 in a
// 0700 dir removed as soon as the CLI returned; their values then must be one
// line (the env-file format). Both CLIs read the file themselves (client side).
import { type BuildSpec, ENV_NAME, type RunSpec } from "./engine.js";

function labelArgs(labels: Record<string, string>): string[] {
  return Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
}

const ENGINE_OWN = new Set([
  "PATH",
  "HOME",
  "TMPDIR",
  "SHELL",
  "USER",
  "LOGNAME",
  "GODEBUG",
  "GOGC",
  "GOMAXPROCS",
  "GOTRACEBACK",
]);
const ENGINE_OWN_PREFIXES = [
  "LD_",
  "DOCKER_",
  "CONTAINER_",
  "CONTAINERS_",
  "PODMAN_",
  "BUILDAH_",
  "REGISTRY_",
  "STORAGE_",
  "XDG_",
  "SSL_CERT_",
  "NOTIFY_SOCKET",
];

/** A variable the engine CLI reads for its own work (so it must keep the agent's value). */
export function engineOwnVariable(name: string): boolean {
  return ENGINE_OWN.has(name) || ENGINE_OWN_PREFIXES.some((p) => name.startsWith(p));
}

export interface RunCall {
  args: string[];
  /** The CLI's environment on top of the agent's: the container's other variables, values included. */
  env: Record<string, string>;
  /** env-file lines of the engine's own variables, or undefined when there are none. */
  envFile: string | undefined;
}

/**
 * `run -d ...`; throws on a name or value that cannot be passed without argv or
 * disk. `envFilePath` is where the caller writes `envFile` when there is one.
 */
export function runCall(spec: RunSpec, envFilePath: string): RunCall {
  const env: Record<string, string> = {};
  const fileLines: string[] = [];
  for (const name of Object.keys(spec.env).sort()) {
    const value = spec.env[name]!;
    if (!ENV_NAME.test(name)) throw new Error(`invalid environment variable name '${name.slice(0, 100)}'`);
    if (value.includes("\0")) throw new Error(`environment variable ${name} holds a NUL character`);
    if (!engineOwnVariable(name)) env[name] = value;
    else if (/[\r\n]/.test(value)) {
      throw new Error(`environment variable ${name} must be one line (the engine reads it from an env file)`);
    } else fileLines.push(`${name}=${value}\n`);
  }
  const envFile = fileLines.length > 0 ? fileLines.join("") : undefined;
  return { args: runArgs(spec, Object.keys(env), envFile ? envFilePath : undefined), env, envFile };
}

function runArgs(spec: RunSpec, names: string[], envFile: string | undefined): string[] {
  const args = ["run", "-d", "--name", spec.name, ...labelArgs(spec.labels)];
  args.push("-p", `127.0.0.1::${spec.containerPort}`);
  if (spec.init) args.push("--init");
  if (spec.restartPolicy) args.push("--restart", spec.restartPolicy);
  if (spec.network) args.push("--network", spec.network);
  if (envFile) args.push("--env-file", envFile);
  for (const name of names) args.push("--env", name);
  // `--` is not needed: the image reference is validated by the caller and never starts with "-".
  args.push(spec.image);
  return args;
}

export function buildArgs(spec: BuildSpec): string[] {
  return ["build", "-f", spec.dockerfile, "-t", spec.tag, ...labelArgs(spec.labels), spec.contextDir];
}

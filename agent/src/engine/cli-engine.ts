// The part docker and podman share: both CLIs take the same restart, login
// (--password-stdin), logout, container inspect, ps --filter/--format, build,
// pull, run, stop, rm, logs and image rm arguments. An adapter names its binary
// and says how a call is pointed at a temporary registry auth file (authFor),
// the one place the two CLIs differ here.
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildArgs, runCall } from "./cli-args.js";
import { runCli } from "./cli-process.js";
import type {
  BuildSpec,
  CallOptions,
  ContainerEngine,
  EngineOutcome,
  LogsCallOptions,
  LogsRead,
  RegistryLogin,
  RunSpec,
} from "./engine.js";

/** How one call uses a temporary auth dir: extra arguments and/or environment. */
export interface AuthUse {
  args: string[];
  env: Record<string, string>;
}

/** A fresh 0700 dir on tmpfs (memory, never disk), or undefined when there is none. */
async function memoryDir(prefix: string): Promise<string | undefined> {
  for (const base of ["/dev/shm", process.env.XDG_RUNTIME_DIR]) {
    if (!base) continue;
    const ok = await stat(base).then(
      (s) => s.isDirectory(),
      () => false,
    );
    if (ok) return mkdtemp(join(base, prefix));
  }
  return undefined;
}

export abstract class CliEngine implements ContainerEngine {
  constructor(
    readonly name: string,
    /** The executable, looked up on the agent's PATH when not absolute. */
    readonly binary: string = name,
  ) {}

  /** Points a login/pull at the auth file kept in `dir` (a fresh 0700 temp dir). */
  protected abstract authFor(dir: string): AuthUse;

  restart(containerName: string, deadlineSeconds: number): Promise<EngineOutcome> {
    // Names start with a letter or digit (validContainerName), so none reads as a flag.
    return runCli({ binary: this.binary, args: ["restart", containerName], deadlineSeconds });
  }

  login(login: RegistryLogin, deadlineSeconds: number): Promise<EngineOutcome> {
    return this.#login(login, { deadlineSeconds }, { args: [], env: {} });
  }

  logout(registry: string, deadlineSeconds: number): Promise<EngineOutcome> {
    return runCli({ binary: this.binary, args: ["logout", registry], deadlineSeconds });
  }

  inspect(containerNames: string[], deadlineSeconds: number): Promise<EngineOutcome> {
    // `container inspect`, not `inspect`: an image of the same name must not answer.
    return runCli({
      binary: this.binary,
      args: ["container", "inspect", ...containerNames],
      deadlineSeconds,
    });
  }

  composeServiceContainers(service: string, deadlineSeconds: number): Promise<EngineOutcome> {
    const filter = `label=com.docker.compose.service=${service}`;
    return runCli({
      binary: this.binary,
      args: ["ps", "--filter", filter, "--format", "{{.Names}}"],
      deadlineSeconds,
    });
  }

  build(spec: BuildSpec, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(buildArgs(spec), opts);
  }

  async pull(image: string, auth: RegistryLogin | undefined, opts: CallOptions): Promise<EngineOutcome> {
    if (auth === undefined) return this.#cli(["pull", image], opts);
    const secrets = [...(opts.secrets ?? []), auth.password];
    // In memory when the machine has a tmpfs; the temp dir (0700) otherwise, removed all the same.
    const dir = (await memoryDir("relayctl-auth-")) ?? (await mkdtemp(join(tmpdir(), "relayctl-auth-")));
    try {
      const use = this.authFor(dir);
      const login = await this.#login(auth, { ...opts, secrets }, use);
      if (login.status !== "completed" || login.exitCode !== 0) return login;
      const pull = await this.#cli([...this.#split(["pull", image], use)], { ...opts, secrets }, use.env);
      return { ...pull, stdout: login.stdout + pull.stdout, stderr: login.stderr + pull.stderr };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async run(spec: RunSpec, opts: CallOptions): Promise<EngineOutcome> {
    const failed = (error: string): EngineOutcome => ({
      status: "failed",
      exitCode: -1,
      stdout: "",
      stderr: "",
      durationMs: 0,
      error,
    });
    let dir: string | undefined;
    try {
      let call = runCall(spec, "");
      if (call.envFile !== undefined) {
        // In memory when the machine has a tmpfs; a private temp dir (0700) otherwise, removed all the same.
        dir = (await memoryDir("relayctl-env-")) ?? (await mkdtemp(join(tmpdir(), "relayctl-env-")));
        const file = join(dir, "env");
        call = runCall(spec, file);
        await writeFile(file, call.envFile ?? "", { mode: 0o600, flag: "wx" });
      }
      // No `env`: the CLI runs with the agent's environment only (cli-args.ts).
      return await runCli({
        binary: this.binary,
        args: call.args,
        deadlineSeconds: opts.deadlineSeconds,
        signal: opts.signal,
        secrets: [...(opts.secrets ?? []), ...Object.values(spec.env)],
      });
    } catch (err) {
      return failed((err as Error).message);
    } finally {
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    }
  }

  stop(containerName: string, graceSeconds: number, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["stop", "-t", String(graceSeconds), containerName], opts);
  }

  remove(containerName: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["rm", "-f", containerName], opts);
  }

  start(containerName: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["start", containerName], opts);
  }

  containersWithLabel(key: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["ps", "-a", "--filter", `label=${key}`, "--format", "{{.Names}}"], opts);
  }

  containersByLabel(key: string, value: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["ps", "-a", "--filter", `label=${key}=${value}`, "--format", "{{.Names}}"], opts);
  }

  logsTail(containerName: string, lines: number, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["logs", "--tail", String(lines), containerName], opts);
  }

  logs(containerName: string, read: LogsRead, opts: LogsCallOptions): Promise<EngineOutcome> {
    const args = ["logs", "--tail", String(read.tail)];
    if (read.since !== undefined) args.push("--since", read.since);
    if (read.follow) args.push("--follow");
    return runCli({
      binary: this.binary,
      args: [...args, containerName],
      deadlineSeconds: opts.deadlineSeconds,
      signal: opts.signal,
      secrets: opts.secrets,
      onOutput: opts.onOutput,
      flushAfterMs: opts.flushAfterMs,
      keepOutput: false,
    });
  }

  removeImage(image: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["image", "rm", image], opts);
  }

  imageList(opts: CallOptions): Promise<EngineOutcome> {
    // Both CLIs list images newest first.
    return this.#cli(["images", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}"], opts);
  }

  imageId(image: string, opts: CallOptions): Promise<EngineOutcome> {
    return this.#cli(["image", "inspect", "--format", "{{.Id}}", image], opts);
  }

  #login(login: RegistryLogin, opts: CallOptions, use: AuthUse): Promise<EngineOutcome> {
    const args = this.#split(["login", login.registry, "-u", login.username, "--password-stdin"], use);
    return runCli({
      binary: this.binary,
      args,
      stdin: login.password,
      deadlineSeconds: opts.deadlineSeconds,
      signal: opts.signal,
      secrets: [...(opts.secrets ?? []), login.password],
      onOutput: opts.onOutput,
      env: use.env,
    });
  }

  /** The subcommand, then the auth arguments (podman's --authfile is a subcommand flag). */
  #split(args: string[], use: AuthUse): string[] {
    return [args[0]!, ...use.args, ...args.slice(1)];
  }

  #cli(args: string[], opts: CallOptions, env?: Record<string, string>): Promise<EngineOutcome> {
    return runCli({
      binary: this.binary,
      args,
      deadlineSeconds: opts.deadlineSeconds,
      signal: opts.signal,
      secrets: opts.secrets,
      onOutput: opts.onOutput,
      env,
    });
  }
}

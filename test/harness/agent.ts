// relayctl-agent as a process: enroll with a join token, run, wait for "connected", kill.
import { basename, join } from "node:path";
import { run } from "@relayctl/devkit";
import { enroll as enrollAgent } from "../../agent/src/enrollment/enroll";
import { AGENT_VERSION } from "../../agent/src/version";
import { ManagedProcess, cleanEnv } from "./process";
import { AGENT_MAIN, parseJsonOutput } from "./programs";

const CONNECT_MS = 30_000;

export interface Enrollment {
  server_id: string;
  server_name: string;
}

function agentEnv(stateDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cleanEnv({
    RELAYCTL_AGENT_STATE_DIR: stateDir,
    RELAYCTL_AGENT_KILL_GRACE_MS: "500",
    RELAYCTL_AGENT_BACKOFF_MIN_MS: "50",
    RELAYCTL_AGENT_BACKOFF_MAX_MS: "500",
    RELAYCTL_AGENT_LOG_LEVEL: "debug",
    // Every test agent shares this machine's podman, so each would list and inspect every
    // test's containers every 5 s: the tests that look at crash reports turn it on.
    RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: "0",
    ...extra,
  });
}

export async function enroll(
  controlPlaneUrl: string,
  joinToken: string,
  stateDir: string,
): Promise<Enrollment> {
  try {
    const { stdout } = await run(
      process.execPath,
      [AGENT_MAIN, "enroll", "--url", controlPlaneUrl, "--token", joinToken, "--state-dir", stateDir],
      { env: agentEnv(stateDir), timeoutMs: 30_000 },
    );
    const out = parseJsonOutput(stdout, "agent enroll");
    return { server_id: String(out.server_id), server_name: String(out.server_name) };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`agent enroll failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
}

/**
 * The same enrollment as `relayctl-agent enroll` (its own function: POST /api/agent/enroll, then
 * the state file), run in this process: a cluster's set-up enrolls a server or more, and the CLI
 * process (~0.7 s of CPU here, most of it loading the agent) is not what those tests test.
 * enroll() above keeps the CLI for the tests that drive it.
 */
export async function enrollInProcess(
  controlPlaneUrl: string,
  joinToken: string,
  stateDir: string,
): Promise<Enrollment> {
  const file = await enrollAgent({
    url: controlPlaneUrl,
    token: joinToken,
    stateDir,
    agentVersion: AGENT_VERSION,
  });
  return { server_id: file.server_id, server_name: file.server_name };
}

export class Agent {
  readonly generations: ManagedProcess[] = [];

  constructor(
    readonly stateDir: string,
    readonly logDir: string,
    readonly env: Record<string, string> = {},
  ) {}

  get proc(): ManagedProcess {
    return this.generations[this.generations.length - 1]!;
  }

  /** Spawns `relayctl-agent run` and waits for its first "connected" line. */
  async start(): Promise<this> {
    const n = this.generations.length + 1;
    this.generations.push(
      new ManagedProcess({
        name: `agent#${n}`,
        command: process.execPath,
        args: [AGENT_MAIN, "run", "--state-dir", this.stateDir],
        env: agentEnv(this.stateDir, this.env),
        // Named after the state dir too: several agents share a log dir (a cluster's).
        logFile: join(this.logDir, `${basename(this.stateDir)}-${n}.log`),
      }),
    );
    await this.waitForConnected(0);
    return this;
  }

  /** Waits for a "connected" line at or after log index `from` (take it with proc.mark()). */
  async waitForConnected(from: number, timeoutMs = CONNECT_MS): Promise<void> {
    await this.proc.waitForMsg("connected", { timeoutMs, from });
  }

  /** Signals the agent process alone, as a crash or an operator would. */
  kill(signal: NodeJS.Signals): Promise<unknown> {
    this.proc.signal(signal);
    return this.proc.exited;
  }

  async stop(): Promise<void> {
    if (this.generations.length > 0) await this.proc.stop("SIGTERM");
  }

  logText(): string {
    return this.generations.map((p) => p.text()).join("\n");
  }
}

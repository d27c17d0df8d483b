// relayctl-server as a process: `serve` in role api, gateway or all, and the admin commands.
import { join } from "node:path";
import { freePort, run } from "@relayctl/devkit";
import { ManagedProcess, cleanEnv } from "./process";
import { SERVER_MAIN, parseJsonOutput } from "./programs";

/**
 * A start that fails past this is reported as such. It covers the migrations of a fresh database:
 * 30 s was seen run out at a load average of 20 (make test's first files all start clusters at once).
 */
const START_MS = 60_000;

/** Starts made when a port picked for one was taken before the server bound it. */
const START_ATTEMPTS = 3;

export type Role = "api" | "gateway" | "all";

export interface ControlPlaneOptions {
  role: Role;
  databaseUrl: string;
  /** Required unless bus is memory. */
  natsUrl?: string;
  bus?: "nats" | "memory";
  /**
   * The gateway's port. Left out, the gateway binds port 0 and reports the port it got
   * ("gateway listening"), and a restart binds that same port again, where agents look.
   */
  gatewayPort?: number;
  /** RELAYCTL_PUBLIC_GATEWAY_URLS of an api-role process (the separate gateway's URL). */
  publicGatewayUrl?: string;
  /** Directory for log files. */
  dir: string;
  /** Extra or overriding RELAYCTL_* variables. */
  env?: Record<string, string>;
}

/** Base64 of 32 bytes; the audit chain key is derived from it (HKDF), so admin commands get it too. */
export const TEST_MASTER_KEY = "cmVsYXljdGwtdGVzdC1tYXN0ZXIta2V5LTMyYnl0ZXM=";

/**
 * Quick heartbeats and sweeps, every control plane's: a revoked credential ends its streams, a
 * deadline is swept and a reboot is seen back within a second. The lease keeps its default (30 s).
 */
export const TEST_TIMINGS = {
  RELAYCTL_HEARTBEAT_INTERVAL_MS: "300",
  RELAYCTL_SWEEP_INTERVAL_MS: "250",
};

/**
 * A 3 s lease, so "agent lost" is observable within seconds: for the tests that wait for a lease
 * to run out (give it as serverEnv). Not everyone's: on a loaded machine a healthy agent's
 * heartbeats can be held up that long, and its running operation was swept as lost.
 */
export const SHORT_LEASE = { RELAYCTL_LEASE_MS: "3000" };

/** The api's and the gateway metrics' ports, picked anew at each start (see ControlPlane.start). */
interface HttpPorts {
  api: number;
  metrics: number;
}

function serverEnv(
  opts: ControlPlaneOptions,
  gatewayPort: number,
  picked: boolean,
  ports: HttpPorts,
): NodeJS.ProcessEnv {
  const gateway = `127.0.0.1:${gatewayPort}`;
  // Role all with port 0 announces the port its own gateway got.
  // A port picked for the first start leaves the public URL to the server (grpcs:// with TLS).
  const publicUrl = opts.publicGatewayUrl ?? (gatewayPort !== 0 && !picked ? `grpc://${gateway}` : undefined);
  return cleanEnv({
    RELAYCTL_ROLE: opts.role,
    RELAYCTL_DATABASE_URL: opts.databaseUrl,
    RELAYCTL_BUS: opts.bus ?? "nats",
    ...(opts.natsUrl ? { RELAYCTL_NATS_URL: opts.natsUrl } : {}),
    RELAYCTL_API_LISTEN: `127.0.0.1:${ports.api}`,
    RELAYCTL_GATEWAY_LISTEN: gateway,
    // Several gateways run side by side: each /metrics listener on a free port.
    RELAYCTL_GATEWAY_METRICS_LISTEN: `127.0.0.1:${ports.metrics}`,
    ...(publicUrl ? { RELAYCTL_PUBLIC_GATEWAY_URLS: publicUrl } : {}),
    RELAYCTL_LOG_LEVEL: "debug",
    // A fixed test-only master key for stored registry credentials (and the audit chain key).
    RELAYCTL_MASTER_KEY: TEST_MASTER_KEY,
    // Test repositories are local paths and git servers on 127.0.0.1 (issue 30, finding 12);
    // test/security-git-sources.test.ts turns it off.
    RELAYCTL_ALLOW_LOCAL_GIT_SOURCES: "true",
    ...TEST_TIMINGS,
    ...opts.env,
  });
}

export class ControlPlane {
  /** http://127.0.0.1:P of the api role (roles api and all). */
  apiUrl = "";
  /** grpc://127.0.0.1:P of the gateway role (roles gateway and all). */
  gatewayUrl = "";
  /** http://127.0.0.1:P of the gateway role's /metrics, /healthz and /readyz listener (role gateway). */
  metricsUrl = "";
  /** Every process this control plane ran (a restart adds one); logs are searched across all. */
  readonly generations: ManagedProcess[] = [];

  constructor(readonly opts: ControlPlaneOptions) {}

  get proc(): ManagedProcess {
    return this.generations[this.generations.length - 1]!;
  }

  /**
   * Starts `serve` and waits for its "listening" lines. The api and the gateway's /metrics listen
   * on freePort picks, not port 0: a port of the ephemeral range can be one a stopped container's
   * DNAT rules still send elsewhere (devkit's listenOnFreePort), and a start whose pick was taken
   * in between is made again on new ones.
   */
  async start(): Promise<this> {
    const gatewayPort = this.opts.gatewayPort;
    for (let attempt = 1; ; attempt++) {
      const before = this.generations.length;
      try {
        return await this.startOnce();
      } catch (err) {
        const proc = this.generations.length > before ? this.proc : undefined;
        const taken = proc !== undefined && /EADDRINUSE/.test(proc.text());
        if (!taken || attempt >= START_ATTEMPTS) throw err;
        await proc.stop("SIGKILL");
        this.opts.gatewayPort = gatewayPort; // a gateway port picked for this start is picked again
      }
    }
  }

  private async startOnce(): Promise<this> {
    // A gateway keeps its port across restarts (agents look for it there). Port 0 would give
    // it one of the kernel's ephemeral range, which any outgoing connection may hold while the
    // gateway is down (CI saw a restart fail with EADDRINUSE): pick one below that range.
    const picked = this.opts.role !== "api" && this.opts.gatewayPort === undefined;
    if (picked) this.opts.gatewayPort = await freePort();
    const ports = { api: await freePort(), metrics: await freePort() };
    const n = this.generations.length + 1;
    const proc = new ManagedProcess({
      name: `server-${this.opts.role}#${n}`,
      command: process.execPath,
      args: [SERVER_MAIN, "serve"],
      env: serverEnv(this.opts, this.opts.gatewayPort ?? 0, picked, ports),
      logFile: join(this.opts.dir, `server-${this.opts.role}-${n}.log`),
    });
    this.generations.push(proc);
    if (this.opts.role !== "gateway") {
      this.apiUrl = String((await proc.waitForMsg("api listening", { timeoutMs: START_MS })).url);
    }
    if (this.opts.role !== "api") {
      this.gatewayUrl = String((await proc.waitForMsg("gateway listening", { timeoutMs: START_MS })).url);
      // From now on the port is fixed: a restarted gateway comes back where agents look for it.
      this.opts.gatewayPort ??= Number(new URL(this.gatewayUrl).port);
    }
    if (this.opts.role === "gateway") {
      const listening = await proc.waitForMsg("gateway metrics listening", { timeoutMs: START_MS });
      this.metricsUrl = String(listening.url);
    }
    return this;
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    if (this.generations.length > 0) await this.proc.stop(signal);
  }

  /** Kills the running process and starts a new one with the same config (same gateway port). */
  async restart(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    await this.stop(signal);
    await this.start();
  }

  /** All log lines of all generations, as text. */
  logText(): string {
    return this.generations.map((p) => p.text()).join("\n");
  }

  admin(args: string[]): Promise<Record<string, unknown>> {
    return admin(this.opts.databaseUrl, args);
  }
}

export function startControlPlane(opts: ControlPlaneOptions): Promise<ControlPlane> {
  return new ControlPlane(opts).start();
}

/** Runs `relayctl-server admin <args>` and returns its JSON answer. */
export async function admin(databaseUrl: string, args: string[]): Promise<Record<string, unknown>> {
  try {
    const { stdout } = await run(process.execPath, [SERVER_MAIN, "admin", ...args], {
      env: cleanEnv({
        RELAYCTL_DATABASE_URL: databaseUrl,
        RELAYCTL_LOG_LEVEL: "warn",
        RELAYCTL_MASTER_KEY: TEST_MASTER_KEY,
      }),
      timeoutMs: 30_000,
    });
    return parseJsonOutput(stdout, `admin ${args[0]}`);
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`admin ${args.join(" ")} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`);
  }
}

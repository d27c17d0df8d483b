// Agent configuration: read once at boot from the environment and validated with
// one schema (docs/process-interfaces.md lists the same variables). Command-line
// flags of `relayctl-agent` override the matching variables.
import { z } from "zod";

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const gatewayUrl = z
  .string()
  .regex(/^grpcs?:\/\/[^/\s]+:\d{1,5}\/?$/, "each gateway must be grpc://host:port or grpcs://host:port");

/** Comma list → trimmed non-empty entries, each a gateway URL. */
export const gatewayList = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((u) => u.trim())
      .filter(Boolean),
  )
  .pipe(z.array(gatewayUrl).min(1, "needs at least one gateway URL"));

const schema = z
  .object({
    /** Credentials, job journal, unreported results. @default /var/lib/relayctl-agent */
    RELAYCTL_AGENT_STATE_DIR: z.string().min(1).default("/var/lib/relayctl-agent"),
    /** Comma list overriding the gateway URLs saved at enrollment. @default from agent.json */
    RELAYCTL_AGENT_GATEWAYS: gatewayList.optional(),
    /** CA bundle (PEM) for grpcs:// gateways. @default system roots */
    RELAYCTL_AGENT_CA_FILE: z.string().min(1).optional(),
    /** Cap of stdout and of stderr each, then a truncation marker. @default 1048576 */
    RELAYCTL_AGENT_OUTPUT_CAP_BYTES: int(1, 256 * 1024 * 1024).default(1_048_576),
    /** SIGTERM → SIGKILL grace at a command's hard deadline (ms). @default 5000 */
    RELAYCTL_AGENT_KILL_GRACE_MS: int(0, 600_000).default(5000),
    /** Reconnect backoff bounds (ms): exponential, full jitter; capped at 2 s for the first 30 s after losing a stream that was up (connection/backoff.ts). @default 250 / 15000 */
    RELAYCTL_AGENT_BACKOFF_MIN_MS: int(1, 3_600_000).default(250),
    RELAYCTL_AGENT_BACKOFF_MAX_MS: int(1, 3_600_000).default(15_000),
    /**
     * Shell that runs commands (POSIX sh compatible). @default /bin/sh — like
     * Docker's RUN and Ansible's shell module; bash costs ~1-2 ms more per command
     * to start. Set /bin/bash, or write `bash -c '...'`, for bash syntax.
     */
    RELAYCTL_AGENT_SHELL: z.string().min(1).optional(),
    /**
     * How the ptys kept ready for commands are started: `host`, by a small
     * long-lived shell (setsid and env(1) from PATH; node-pty where they are
     * missing), or `fork`, by node-pty's fork of the agent on every run. @default host
     */
    RELAYCTL_AGENT_LAUNCHERS: z.enum(["host", "fork"]).default("host"),
    /**
     * Container engine for deployments, restart, registry login/logout and the
     * port check of route syncs (container inspect): docker, podman, or auto
     * (the first of docker, podman whose `<engine> info` answers: a docker CLI
     * without a daemon is skipped). An explicit engine is checked the same way
     * and reported, never replaced. Deployments and restarts fail at once, with
     * the reason and the fix, when it does not answer. @default auto
     */
    RELAYCTL_AGENT_CONTAINER_ENGINE: z.enum(["docker", "podman", "auto"]).default("auto"),
    /**
     * Seconds between probes of the container engine (engine-monitor.ts), so one
     * started or installed later is found without a restart; a job that finds
     * none working probes again at once. 0: only at start and on such jobs. @default 300
     */
    RELAYCTL_AGENT_ENGINE_RECHECK_SECONDS: int(0, 86_400).default(300),
    /** Run by reboot jobs through `/bin/sh -c` when the server has no cloud provider. @default systemctl reboot */
    RELAYCTL_AGENT_REBOOT_COMMAND: z.string().min(1).default("systemctl reboot"),
    /**
     * File the boot id is read from (reboot detection). A testing aid: tests fake a
     * reboot by writing a new id into their own file. @default /proc/sys/kernel/random/boot_id
     */
    RELAYCTL_AGENT_BOOT_ID_FILE: z.string().min(1).default("/proc/sys/kernel/random/boot_id"),
    /**
     * Reverse proxy that route-sync jobs (external deploy) write: caddy (admin
     * API), nginx (one file per application, `nginx -t`, reload) or traefik (file
     * provider directory). none → route-sync jobs fail with a clear reason. @default none
     */
    RELAYCTL_AGENT_PROXY: z.enum(["none", "caddy", "nginx", "traefik"]).default("none"),
    /**
     * Upstream of a route: host → 127.0.0.1:<port the container publishes> (proxy
     * on the host); container-network → <container_name>:<container_port> (proxy
     * on a shared container network). Either way the engine must show the
     * container serving the port (jobs/port-check.ts). @default host
     */
    RELAYCTL_AGENT_PROXY_UPSTREAM: z.enum(["host", "container-network"]).default("host"),
    /**
     * Seconds between checks of the reverse proxy (proxy-status/check.ts: Caddy's
     * admin API answers, nginx's binary and conf dir, Traefik's dir), reported as
     * `proxy` in GET /api/servers; a route write the proxy did not take checks
     * again at once. 0: only at start and after such writes. @default 30
     */
    RELAYCTL_AGENT_PROXY_RECHECK_SECONDS: int(0, 86_400).default(30),
    /** Caddy's admin API. @default http://127.0.0.1:2019 */
    RELAYCTL_AGENT_CADDY_ADMIN_URL: z.string().url().default("http://127.0.0.1:2019"),
    /** Name of the HTTP server the agent owns in Caddy's config. @default relayctl */
    RELAYCTL_AGENT_CADDY_SERVER: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/)
      .default("relayctl"),
    /** Comma list of listen addresses of that server. @default :443 with automatic HTTPS, else :80 */
    RELAYCTL_AGENT_CADDY_LISTEN: z.string().min(1).optional(),
    /** Caddy's automatic HTTPS (certificates, HTTP→HTTPS redirects) for routed domains. @default true */
    RELAYCTL_AGENT_CADDY_AUTO_HTTPS: z.enum(["true", "false"]).default("true"),
    /** Directory nginx includes, where the agent writes relayctl-<id>.conf. @default /etc/nginx/conf.d */
    RELAYCTL_AGENT_NGINX_CONF_DIR: z.string().min(1).default("/etc/nginx/conf.d"),
    /** `listen` of the generated server blocks. @default 80 */
    RELAYCTL_AGENT_NGINX_LISTEN: z
      .string()
      .regex(/^[\w.:[\]]+( ssl)?$/)
      .default("80"),
    /** nginx binary. @default nginx */
    RELAYCTL_AGENT_NGINX_BIN: z.string().min(1).default("nginx"),
    /** nginx's main config (-c) for `nginx -t` and reload. @default nginx's own */
    RELAYCTL_AGENT_NGINX_CONFIG: z.string().min(1).optional(),
    /** nginx's prefix (-p). @default nginx's own */
    RELAYCTL_AGENT_NGINX_PREFIX: z.string().min(1).optional(),
    /** Directory Traefik's file provider watches. @default /etc/traefik/dynamic */
    RELAYCTL_AGENT_TRAEFIK_DIR: z.string().min(1).default("/etc/traefik/dynamic"),
    /** Comma list of Traefik entry points of the routers. @default web */
    RELAYCTL_AGENT_TRAEFIK_ENTRYPOINTS: z.string().min(1).default("web"),
    /**
     * Seconds a deployment lets the old container finish its requests after the
     * route switched to the new one, before it is stopped and removed. @default 5
     */
    RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS: int(0, 3600).default(5),
    /**
     * Seconds between looks at the deployed containers (state, restarts, crash
     * loops: containers/watcher.ts). `0`: one look at start only (the start of
     * live containers after a reboot still happens), no crash reports. @default 5
     */
    RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS: int(0, 3600).default(5),
    /**
     * On podman the agent starts a crashed container again itself, at once; once its
     * application is in a crash loop, after a hold of this many seconds, twice as long at
     * each further hold of the loop, at most 300 (containers/crash-hold.ts). `0`: no holds,
     * every crash started again at once. @default 10
     */
    RELAYCTL_AGENT_CRASH_HOLD_SECONDS: int(0, 300).default(10),
    /**
     * Container network deployed containers join (needed with
     * RELAYCTL_AGENT_PROXY_UPSTREAM=container-network, where the proxy reaches
     * them by name). @default none (the engine's default network)
     */
    RELAYCTL_AGENT_DEPLOY_NETWORK: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, "must be a container network name")
      .optional(),
    /**
     * Run deployed containers with `--init` (a tiny init as PID 1 that forwards
     * SIGTERM, so a stop takes a moment instead of the engine's 10 s). @default true
     */
    RELAYCTL_AGENT_DEPLOY_INIT: z.enum(["true", "false"]).default("true"),
    /**
     * OpenTelemetry tracing: `otlp` exports the agent's job spans over OTLP/HTTP to
     * the standard OTEL_EXPORTER_OTLP_ENDPOINT; `off` loads no SDK at all. @default off
     */
    RELAYCTL_AGENT_TRACING: z.enum(["off", "otlp"]).default("off"),
    /** pino level; logs are JSON lines on stdout. @default info */
    RELAYCTL_AGENT_LOG_LEVEL: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
      .default("info"),
  })
  .refine((c) => c.RELAYCTL_AGENT_BACKOFF_MIN_MS <= c.RELAYCTL_AGENT_BACKOFF_MAX_MS, {
    message: "must not be greater than RELAYCTL_AGENT_BACKOFF_MAX_MS",
    path: ["RELAYCTL_AGENT_BACKOFF_MIN_MS"],
  });

export type LogLevel = z.infer<typeof schema>["RELAYCTL_AGENT_LOG_LEVEL"];

export interface AgentConfig {
  stateDir: string;
  gatewayUrls: string[] | undefined;
  caFile: string | undefined;
  outputCapBytes: number;
  killGraceMs: number;
  backoff: { minMs: number; maxMs: number };
  shell: string;
  launcherHost: boolean;
  containerEngine: "docker" | "podman" | "auto";
  engineRecheckSeconds: number;
  proxyRecheckSeconds: number;
  rebootCommand: string;
  bootIdFile: string;
  logLevel: LogLevel;
  tracing: "off" | "otlp";
  proxy: ProxyConfig;
  deploy: DeployConfig;
  containerWatchSeconds: number;
  /** First hold of a podman crash loop (s); 0: none. */
  crashHoldSeconds: number;
}

export interface DeployConfig {
  drainSeconds: number;
  network: string | undefined;
  init: boolean;
  /**
   * Podman's crashed containers are started again by the agent's container watcher, not by
   * podman's restart policy (containers/crash-hold.ts); false when the watcher is off. Absent: false.
   */
  agentRestarts?: boolean;
  /** This agent's server id, from its enrollment (not the environment): labels its containers. */
  serverId?: string;
}

export type ProxyConfig =
  | { kind: "none"; upstream: UpstreamMode }
  | {
      kind: "caddy";
      upstream: UpstreamMode;
      adminUrl: string;
      serverName: string;
      listen: string[] | undefined;
      automaticHttps: boolean;
    }
  | {
      kind: "nginx";
      upstream: UpstreamMode;
      confDir: string;
      listen: string;
      nginxBin: string;
      configFile: string | undefined;
      prefix: string | undefined;
    }
  | { kind: "traefik"; upstream: UpstreamMode; dir: string; entryPoints: string[] };

type UpstreamMode = "host" | "container-network";

const commaList = (s: string) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);

function proxyConfig(c: z.infer<typeof schema>): ProxyConfig {
  const upstream = c.RELAYCTL_AGENT_PROXY_UPSTREAM;
  switch (c.RELAYCTL_AGENT_PROXY) {
    case "caddy":
      return {
        kind: "caddy",
        upstream,
        adminUrl: c.RELAYCTL_AGENT_CADDY_ADMIN_URL.replace(/\/+$/, ""),
        serverName: c.RELAYCTL_AGENT_CADDY_SERVER,
        listen: c.RELAYCTL_AGENT_CADDY_LISTEN ? commaList(c.RELAYCTL_AGENT_CADDY_LISTEN) : undefined,
        automaticHttps: c.RELAYCTL_AGENT_CADDY_AUTO_HTTPS === "true",
      };
    case "nginx":
      return {
        kind: "nginx",
        upstream,
        confDir: c.RELAYCTL_AGENT_NGINX_CONF_DIR,
        listen: c.RELAYCTL_AGENT_NGINX_LISTEN,
        nginxBin: c.RELAYCTL_AGENT_NGINX_BIN,
        configFile: c.RELAYCTL_AGENT_NGINX_CONFIG,
        prefix: c.RELAYCTL_AGENT_NGINX_PREFIX,
      };
    case "traefik":
      return {
        kind: "traefik",
        upstream,
        dir: c.RELAYCTL_AGENT_TRAEFIK_DIR,
        entryPoints: commaList(c.RELAYCTL_AGENT_TRAEFIK_ENTRYPOINTS),
      };
    default:
      return { kind: "none", upstream };
  }
}

/** Thrown with a one-line message naming the variable at fault. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`${issue.path.join(".") || "environment"}: ${issue.message}`);
  }
  const c = parsed.data;
  return {
    stateDir: c.RELAYCTL_AGENT_STATE_DIR,
    gatewayUrls: c.RELAYCTL_AGENT_GATEWAYS,
    caFile: c.RELAYCTL_AGENT_CA_FILE,
    outputCapBytes: c.RELAYCTL_AGENT_OUTPUT_CAP_BYTES,
    killGraceMs: c.RELAYCTL_AGENT_KILL_GRACE_MS,
    backoff: { minMs: c.RELAYCTL_AGENT_BACKOFF_MIN_MS, maxMs: c.RELAYCTL_AGENT_BACKOFF_MAX_MS },
    shell: c.RELAYCTL_AGENT_SHELL ?? "/bin/sh",
    launcherHost: c.RELAYCTL_AGENT_LAUNCHERS === "host",
    containerEngine: c.RELAYCTL_AGENT_CONTAINER_ENGINE,
    engineRecheckSeconds: c.RELAYCTL_AGENT_ENGINE_RECHECK_SECONDS,
    proxyRecheckSeconds: c.RELAYCTL_AGENT_PROXY_RECHECK_SECONDS,
    rebootCommand: c.RELAYCTL_AGENT_REBOOT_COMMAND,
    bootIdFile: c.RELAYCTL_AGENT_BOOT_ID_FILE,
    logLevel: c.RELAYCTL_AGENT_LOG_LEVEL,
    tracing: c.RELAYCTL_AGENT_TRACING,
    proxy: proxyConfig(c),
    containerWatchSeconds: c.RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS,
    crashHoldSeconds: c.RELAYCTL_AGENT_CRASH_HOLD_SECONDS,
    deploy: {
      drainSeconds: c.RELAYCTL_AGENT_DEPLOY_DRAIN_SECONDS,
      network: c.RELAYCTL_AGENT_DEPLOY_NETWORK,
      init: c.RELAYCTL_AGENT_DEPLOY_INIT === "true",
      agentRestarts: c.RELAYCTL_AGENT_CONTAINER_WATCH_SECONDS > 0,
    },
  };
}

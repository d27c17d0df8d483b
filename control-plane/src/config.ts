// Control-plane configuration: read once at boot from the environment (and
// optionally a JSON file), validated with one schema (config-schema.ts, where every
// variable is documented with its default); here, the Config the program reads and
// how the parsed variables become it.
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { type AccountsConfig, parseAccountsConfig } from "./accounts/config.js";
import { type AppsUrl, parseAppsUrl } from "./applications/app-url.js";
import { parseAllowlistEntry } from "./auth/ip-allowlist.js";
import { type InstallConfig, parseInstallConfig } from "./install/config.js";
import { type Raw, schema } from "./config-schema.js";

export interface Config {
  role: Raw["RELAYCTL_ROLE"];
  runsApi: boolean;
  runsGateway: boolean;
  databaseUrl: string;
  bus: Raw["RELAYCTL_BUS"];
  natsServers: string[];
  nats: NatsOptions;
  /** Serve gRPC server reflection on the gateway. */
  grpcReflection: boolean;
  apiListen: { host: string; port: number };
  gatewayListen: { host: string; port: number };
  /** Agents' handshakes a gateway works on at once (RELAYCTL_GATEWAY_MAX_HANDSHAKES). */
  gatewayMaxHandshakes: number;
  publicGatewayUrls: string[] | undefined;
  tls: { certFile: string; keyFile: string } | undefined;
  allowPlaintext: boolean;
  execCeilingSeconds: number;
  heartbeatIntervalMs: number;
  leaseMs: number;
  sweepIntervalMs: number;
  /** Fastify's trustProxy: the proxies' addresses/CIDRs, a hop count, or false (none). */
  trustProxy: string[] | number | false;
  http: {
    requestTimeoutMs: number;
    headersTimeoutMs: number;
    connectionTimeoutMs: number;
    maxHeaderBytes: number;
  };
  rebootTimeoutSeconds: number;
  externalDeploySessionTtlSeconds: number;
  /** Cloud provider API base URLs, without a trailing slash. */
  providerUrls: { hetzner: string; digitalocean: string };
  /** AES-256-GCM key of stored secrets; undefined when RELAYCTL_MASTER_KEY is unset. */
  masterKey: Buffer | undefined;
  /** RELAYCTL_AUDIT_HMAC_KEY as given (base64); audit/chain-key.ts resolves the key from it or its defaults. */
  auditHmacKey: string | undefined;
  /** The GitHub App; undefined when not configured (its endpoints answer 503). */
  github: GitHubAppConfig | undefined;
  githubDeployTimeoutSeconds: number;
  /** /webhooks/github's bounds before a body is verified. */
  githubWebhook: { concurrentBodies: number; perIpPerMinute: number };
  /** RELAYCTL_PUBLIC_URL without a trailing slash. */
  publicUrl: string | undefined;
  /** RELAYCTL_APPS_URL parsed (applications/app-url.ts); undefined when unset. */
  appsUrl: AppsUrl | undefined;
  /** RELAYCTL_ALLOW_LOCAL_GIT_SOURCES (applications/source.ts). */
  allowLocalGitSources: boolean;
  logLevel: Raw["RELAYCTL_LOG_LEVEL"];
  /** Application logs: bounds of the follows each api instance serves (applications/logs-limits.ts). */
  logs: { followsPerKey: number; followsPerTenant: number; followMaxSeconds: number };
  /** Deployment live logs: the same kind of bounds (deployments/live-log.ts). */
  liveLog: { followsPerKey: number; followsPerTenant: number };
  /** Prometheus metrics: the gateway role's HTTP listener (undefined: off) and the optional scrape token. */
  metrics: { gatewayListen: { host: string; port: number } | undefined; token: string | undefined };
  tracing: Raw["RELAYCTL_TRACING"];
  /** People's sign-in and the OAuth server (accounts/config.ts). */
  accounts: AccountsConfig;
  /** The one-line agent install: installer and agent bundles (install/config.ts). */
  install: InstallConfig;
}

export interface GitHubAppConfig {
  appId: string;
  slug: string;
  /** PEM text of the App's private key (read at boot). */
  privateKey: string;
  webhookSecret: string;
  /** OAuth client of the App: exchanges the installing user's code at the setup URL. */
  clientId: string;
  clientSecret: string;
  /** REST API base, without a trailing slash. */
  apiUrl: string;
  /** Web base, without a trailing slash. */
  webUrl: string;
}

/** How the control plane authenticates to NATS and secures the connection. */
export interface NatsOptions {
  credsFile?: string;
  user?: string;
  password?: string;
  token?: string;
  /** TLS to NATS: on when any file is set or a URL is tls://. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

export class ConfigError extends Error {}

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

function splitHostPort(v: string): { host: string; port: number } {
  const i = v.lastIndexOf(":");
  return { host: v.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(v.slice(i + 1)) };
}

const list = (v: string | undefined) =>
  v
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);

/** Parses the environment (and RELAYCTL_CONFIG_FILE, whose keys env overrides). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  let fromFile: Record<string, string> = {};
  if (env.RELAYCTL_CONFIG_FILE) {
    try {
      fromFile = JSON.parse(readFileSync(env.RELAYCTL_CONFIG_FILE, "utf8"));
    } catch (err) {
      throw new ConfigError(`RELAYCTL_CONFIG_FILE: cannot read ${env.RELAYCTL_CONFIG_FILE}: ${String(err)}`);
    }
  }
  const merged = { ...fromFile, ...pickRelayctl(env) };
  const parsed = schema.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`${issue.path.join(".") || "config"}: ${issue.message}`);
  }
  const c = parsed.data;
  const accounts = parseAccountsConfig(merged);
  if (typeof accounts === "string") throw new ConfigError(accounts);
  const install = parseInstallConfig(merged);
  if (typeof install === "string") throw new ConfigError(install);
  const gatewayListen = splitHostPort(c.RELAYCTL_GATEWAY_LISTEN);
  if (
    c.RELAYCTL_ROLE !== "api" &&
    !c.RELAYCTL_TLS_CERT_FILE &&
    !c.RELAYCTL_ALLOW_PLAINTEXT &&
    !LOOPBACK.has(gatewayListen.host)
  ) {
    throw new ConfigError(
      `RELAYCTL_GATEWAY_LISTEN: plaintext on ${gatewayListen.host} refused: set RELAYCTL_TLS_CERT_FILE/RELAYCTL_TLS_KEY_FILE or RELAYCTL_ALLOW_PLAINTEXT=true`,
    );
  }
  const apiListen = splitHostPort(c.RELAYCTL_API_LISTEN);
  // Off loopback, the Host header is anyone's to write: it must never decide relayctl's own
  // URLs (OAuth issuer, invite links, install commands), so the address is told (http/edge.ts).
  if (c.RELAYCTL_ROLE !== "gateway" && !LOOPBACK.has(apiListen.host) && !c.RELAYCTL_PUBLIC_URL)
    throw new ConfigError(
      `RELAYCTL_PUBLIC_URL: required when the api listens on ${apiListen.host} (not loopback): set it to the address people and agents reach relayctl at, e.g. https://relayctl.example.com`,
    );
  const appsUrl = c.RELAYCTL_APPS_URL ? parseAppsUrl(c.RELAYCTL_APPS_URL) : undefined;
  if (typeof appsUrl === "string") throw new ConfigError(`RELAYCTL_APPS_URL: ${appsUrl}`);
  const natsServers = list(c.RELAYCTL_NATS_URL) ?? [];
  if (c.RELAYCTL_BUS === "nats" && natsServers.length === 0)
    throw new ConfigError("RELAYCTL_NATS_URL: empty");
  return {
    role: c.RELAYCTL_ROLE,
    runsApi: c.RELAYCTL_ROLE !== "gateway",
    runsGateway: c.RELAYCTL_ROLE !== "api",
    databaseUrl: c.RELAYCTL_DATABASE_URL,
    bus: c.RELAYCTL_BUS,
    natsServers,
    nats: natsOptions(c, natsServers),
    grpcReflection: c.RELAYCTL_GRPC_REFLECTION,
    apiListen,
    gatewayListen,
    gatewayMaxHandshakes: c.RELAYCTL_GATEWAY_MAX_HANDSHAKES,
    publicGatewayUrls: list(c.RELAYCTL_PUBLIC_GATEWAY_URLS),
    tls: c.RELAYCTL_TLS_CERT_FILE
      ? { certFile: c.RELAYCTL_TLS_CERT_FILE, keyFile: c.RELAYCTL_TLS_KEY_FILE! }
      : undefined,
    allowPlaintext: c.RELAYCTL_ALLOW_PLAINTEXT,
    execCeilingSeconds: c.RELAYCTL_EXEC_CEILING_SECONDS,
    heartbeatIntervalMs: c.RELAYCTL_HEARTBEAT_INTERVAL_MS,
    leaseMs: c.RELAYCTL_LEASE_MS,
    sweepIntervalMs: c.RELAYCTL_SWEEP_INTERVAL_MS,
    trustProxy: trustedProxies(c.RELAYCTL_TRUSTED_PROXIES),
    http: {
      requestTimeoutMs: c.RELAYCTL_HTTP_REQUEST_TIMEOUT_MS,
      headersTimeoutMs: c.RELAYCTL_HTTP_HEADERS_TIMEOUT_MS,
      connectionTimeoutMs: c.RELAYCTL_HTTP_CONNECTION_TIMEOUT_MS,
      maxHeaderBytes: c.RELAYCTL_HTTP_MAX_HEADER_BYTES,
    },
    rebootTimeoutSeconds: c.RELAYCTL_REBOOT_TIMEOUT_SECONDS,
    externalDeploySessionTtlSeconds: c.RELAYCTL_EXTERNAL_DEPLOY_SESSION_TTL_SECONDS,
    providerUrls: {
      hetzner: c.RELAYCTL_HETZNER_API_URL.replace(/\/+$/, ""),
      digitalocean: c.RELAYCTL_DIGITALOCEAN_API_URL.replace(/\/+$/, ""),
    },
    masterKey: c.RELAYCTL_MASTER_KEY ? Buffer.from(c.RELAYCTL_MASTER_KEY, "base64") : undefined,
    auditHmacKey: c.RELAYCTL_AUDIT_HMAC_KEY,
    github: githubApp(c),
    githubDeployTimeoutSeconds: c.RELAYCTL_GITHUB_DEPLOY_TIMEOUT_SECONDS,
    githubWebhook: {
      concurrentBodies: c.RELAYCTL_GITHUB_WEBHOOK_CONCURRENT_BODIES,
      perIpPerMinute: c.RELAYCTL_GITHUB_WEBHOOK_PER_IP_PER_MINUTE,
    },
    publicUrl: c.RELAYCTL_PUBLIC_URL?.replace(/\/+$/, ""),
    appsUrl,
    allowLocalGitSources: c.RELAYCTL_ALLOW_LOCAL_GIT_SOURCES,
    logLevel: c.RELAYCTL_LOG_LEVEL,
    logs: {
      followsPerKey: c.RELAYCTL_LOGS_FOLLOWS_PER_KEY,
      followsPerTenant: c.RELAYCTL_LOGS_FOLLOWS_PER_TENANT,
      followMaxSeconds: c.RELAYCTL_LOGS_FOLLOW_MAX_SECONDS,
    },
    liveLog: {
      followsPerKey: c.RELAYCTL_LIVE_LOG_STREAMS_PER_KEY,
      followsPerTenant: c.RELAYCTL_LIVE_LOG_STREAMS_PER_TENANT,
    },
    metrics: {
      gatewayListen:
        c.RELAYCTL_GATEWAY_METRICS_LISTEN === "off"
          ? undefined
          : splitHostPort(c.RELAYCTL_GATEWAY_METRICS_LISTEN),
      token: c.RELAYCTL_METRICS_TOKEN,
    },
    tracing: c.RELAYCTL_TRACING,
    accounts,
    install,
  };
}

function githubApp(c: Raw): GitHubAppConfig | undefined {
  if (!c.RELAYCTL_GITHUB_APP_ID) return undefined;
  let privateKey: string;
  try {
    privateKey = readFileSync(c.RELAYCTL_GITHUB_PRIVATE_KEY_FILE!, "utf8");
  } catch (err) {
    throw new ConfigError(
      `RELAYCTL_GITHUB_PRIVATE_KEY_FILE: cannot read ${c.RELAYCTL_GITHUB_PRIVATE_KEY_FILE}: ${(err as Error).message}`,
    );
  }
  try {
    createPrivateKey(privateKey);
  } catch {
    throw new ConfigError(
      "RELAYCTL_GITHUB_PRIVATE_KEY_FILE: not a PEM private key (the App's .pem download)",
    );
  }
  return {
    appId: c.RELAYCTL_GITHUB_APP_ID,
    slug: c.RELAYCTL_GITHUB_APP_SLUG!,
    privateKey,
    webhookSecret: c.RELAYCTL_GITHUB_WEBHOOK_SECRET!,
    clientId: c.RELAYCTL_GITHUB_CLIENT_ID!,
    clientSecret: c.RELAYCTL_GITHUB_CLIENT_SECRET!,
    apiUrl: c.RELAYCTL_GITHUB_API_URL.replace(/\/+$/, ""),
    webUrl: c.RELAYCTL_GITHUB_WEB_URL.replace(/\/+$/, ""),
  };
}

function natsOptions(c: Raw, servers: string[]): NatsOptions {
  const tlsWanted =
    Boolean(c.RELAYCTL_NATS_TLS_CA_FILE || c.RELAYCTL_NATS_TLS_CERT_FILE) ||
    servers.some((u) => u.startsWith("tls://"));
  return {
    credsFile: c.RELAYCTL_NATS_CREDS_FILE,
    user: c.RELAYCTL_NATS_USER,
    password: c.RELAYCTL_NATS_PASSWORD,
    token: c.RELAYCTL_NATS_TOKEN,
    tls: tlsWanted
      ? {
          caFile: c.RELAYCTL_NATS_TLS_CA_FILE,
          certFile: c.RELAYCTL_NATS_TLS_CERT_FILE,
          keyFile: c.RELAYCTL_NATS_TLS_KEY_FILE,
        }
      : undefined,
  };
}

/** RELAYCTL_TRUSTED_PROXIES → Fastify's trustProxy (never `true`: that trusts every hop). */
function trustedProxies(value: string | undefined): string[] | number | false {
  const entries = list(value) ?? [];
  if (entries.length === 0) return false;
  if (entries.length === 1 && /^\d+$/.test(entries[0])) {
    const hops = Number(entries[0]);
    if (hops < 1 || hops > 16) throw new ConfigError("RELAYCTL_TRUSTED_PROXIES: a hop count is 1 to 16");
    return hops;
  }
  const bad = entries.find((e) => !parseAllowlistEntry(e));
  if (bad)
    throw new ConfigError(
      `RELAYCTL_TRUSTED_PROXIES: '${bad}' is not an IPv4/IPv6 address or CIDR range (or give a hop count)`,
    );
  return entries;
}

function pickRelayctl(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (k.startsWith("RELAYCTL_") && v !== undefined) out[k] = v;
  return out;
}

/** Only the database is needed by admin commands and migrations. */
export function loadDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  const url = env.RELAYCTL_DATABASE_URL;
  if (!url || !/^(mysql|sqlite):\/\//.test(url)) {
    throw new ConfigError(
      "RELAYCTL_DATABASE_URL: required, mysql://user:pass@host:port/db or sqlite:///path",
    );
  }
  return url;
}

// The control plane's settings as the environment gives them: every RELAYCTL_*
// variable in one schema, with the rules that tie variables together. Every variable
// is documented here with its default; docs/process-interfaces.md and the README
// mirror this. config.ts parses the environment with it into a Config.
import { z } from "zod";

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, "must be host:port (port 0 = any free port)");

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

export const schema = z
  .object({
    /** `api`, `gateway` or `all` (both roles in one process). @default all */
    RELAYCTL_ROLE: z.enum(["api", "gateway", "all"]).default("all"),
    /** `mysql://user:pass@host:port/db` or `sqlite:///abs/path.db` (sqlite is for dev). */
    RELAYCTL_DATABASE_URL: z
      .string({ error: "required: mysql://user:pass@host:port/db or sqlite:///abs/path.db" })
      .regex(/^(mysql|sqlite):\/\//, "must start with mysql:// or sqlite://"),
    /** Job bus between the roles: `nats`, or `memory` (in-process, role `all` only). @default nats */
    RELAYCTL_BUS: z.enum(["nats", "memory"]).default("nats"),
    /** Comma-separated NATS server URLs. @default nats://127.0.0.1:4222 */
    RELAYCTL_NATS_URL: z.string().default("nats://127.0.0.1:4222"),
    /** NATS credentials file (JWT + NKey seed, `nsc` output). @default unset */
    RELAYCTL_NATS_CREDS_FILE: z.string().optional(),
    /** NATS user and password (both or neither). @default unset */
    RELAYCTL_NATS_USER: z.string().optional(),
    RELAYCTL_NATS_PASSWORD: z.string().optional(),
    /** NATS authentication token. @default unset */
    RELAYCTL_NATS_TOKEN: z.string().optional(),
    /**
     * PEM CA bundle that signs the NATS servers' certificates; setting it turns TLS
     * on (so does a tls:// URL). Jobs carry env values and registry passwords:
     * use TLS whenever NATS is not on this host. @default unset
     */
    RELAYCTL_NATS_TLS_CA_FILE: z.string().optional(),
    /** Client certificate and key (PEM) for NATS servers that verify clients. @default unset */
    RELAYCTL_NATS_TLS_CERT_FILE: z.string().optional(),
    RELAYCTL_NATS_TLS_KEY_FILE: z.string().optional(),
    /** HTTP API listen address. @default 127.0.0.1:8080 */
    RELAYCTL_API_LISTEN: hostPort.default("127.0.0.1:8080"),
    /** gRPC gateway listen address. @default 127.0.0.1:8443 */
    RELAYCTL_GATEWAY_LISTEN: hostPort.default("127.0.0.1:8443"),
    /** Gateway URLs handed to agents at enrollment. @default grpc://<gateway listen> */
    RELAYCTL_PUBLIC_GATEWAY_URLS: z.string().optional(),
    /**
     * Agents' handshakes a gateway works on at once; more connections wait, in order, with the
     * bytes they sent (gateway/handshake-gate.ts). @default 1000
     */
    RELAYCTL_GATEWAY_MAX_HANDSHAKES: int(1, 1_000_000).default(1000),
    /** PEM files for gateway TLS. Without them the gateway is plaintext. */
    RELAYCTL_TLS_CERT_FILE: z.string().optional(),
    RELAYCTL_TLS_KEY_FILE: z.string().optional(),
    /** Allow a plaintext gateway on a non-loopback address. @default false */
    RELAYCTL_ALLOW_PLAINTEXT: bool.default(false),
    /**
     * Serve gRPC server reflection on the gateway (grpcurl and friends). Off by
     * default: it describes the agent protocol to anyone who can reach the port.
     * @default false
     */
    RELAYCTL_GRPC_REFLECTION: bool.default(false),
    /** Hard deadline of an exec command (seconds). @default 3600 */
    RELAYCTL_EXEC_CEILING_SECONDS: int(1, 7 * 24 * 3600).default(3600),
    /** Heartbeat interval told to agents (ms). @default 5000 */
    RELAYCTL_HEARTBEAT_INTERVAL_MS: int(50, 600_000).default(5000),
    /** Without a heartbeat for this long, a running operation ends failed (ms). @default 30000 */
    RELAYCTL_LEASE_MS: int(200, 3_600_000).default(30_000),
    /** How often the gateway role sweeps expired leases and deadlines (ms). @default 1000 */
    RELAYCTL_SWEEP_INTERVAL_MS: int(50, 600_000).default(1000),
    /** A reboot ends `timeout` when the agent is not back (new boot id) this long after the request (seconds). @default 600 */
    RELAYCTL_REBOOT_TIMEOUT_SECONDS: int(1, 24 * 3600).default(600),
    /** Lifetime of an external-deploy session and its rds_ token (seconds). @default 1800 */
    RELAYCTL_EXTERNAL_DEPLOY_SESSION_TTL_SECONDS: int(60, 24 * 3600).default(1800),
    /** Hetzner Cloud API base URL (provider reboots). @default https://api.hetzner.cloud/v1 */
    RELAYCTL_HETZNER_API_URL: z.url({ protocol: /^https?$/ }).default("https://api.hetzner.cloud/v1"),
    /** DigitalOcean API base URL (provider reboots). @default https://api.digitalocean.com/v2 */
    RELAYCTL_DIGITALOCEAN_API_URL: z.url({ protocol: /^https?$/ }).default("https://api.digitalocean.com/v2"),
    /**
     * Retired: `true` trusted every hop of X-Forwarded-For, so a client could write
     * its own address in front of the one the proxy appends. `true` is refused at
     * boot; set RELAYCTL_TRUSTED_PROXIES instead. @default false
     */
    RELAYCTL_TRUST_PROXY: bool.default(false),
    /**
     * The proxies in front of the api: a comma list of addresses/CIDR ranges, or a
     * hop count. The caller IP is the first address of X-Forwarded-For, read from
     * the right, that is not a trusted proxy. @default unset (X-Forwarded-For is ignored)
     */
    RELAYCTL_TRUSTED_PROXIES: z.string().optional(),
    /** Time a client has to send a whole request, headers and body (ms). @default 30000 */
    RELAYCTL_HTTP_REQUEST_TIMEOUT_MS: int(1000, 3_600_000).default(30_000),
    /** Time a client has to send the request headers (ms); at most the request timeout. @default 10000 */
    RELAYCTL_HTTP_HEADERS_TIMEOUT_MS: int(1000, 3_600_000).default(10_000),
    /**
     * An idle socket is closed after this (ms). It must outlast the longest answer
     * the api waits for (exec waits up to 900 s). @default 960000
     */
    RELAYCTL_HTTP_CONNECTION_TIMEOUT_MS: int(1000, 24 * 3_600_000).default(960_000),
    /** Largest request header block accepted (bytes; 431 beyond). @default 16384 */
    RELAYCTL_HTTP_MAX_HEADER_BYTES: int(1024, 1024 * 1024).default(16_384),
    /**
     * Base64 of 32 random bytes: the AES-256-GCM key of stored secrets (registry
     * passwords). Optional; without it the registry credential endpoints and
     * registry login answer 503 RC_ERR_MASTER_KEY_UNSET. @default unset
     */
    RELAYCTL_MASTER_KEY: z
      .string()
      .refine((v) => /^[A-Za-z0-9+/]+={0,2}$/.test(v) && Buffer.from(v, "base64").length === 32, {
        message: "must be the base64 of exactly 32 bytes (openssl rand -base64 32)",
      })
      .optional(),
    /**
     * Base64 of 32 random bytes: the HMAC-SHA256 key of the audit chain, kept
     * out of the database. @default on SQLite, a key file `<database>.audit-key`
     * made on first use; on MySQL, derived from RELAYCTL_MASTER_KEY (HKDF-SHA256,
     * "relayctl audit chain v1"); with neither, serve refuses to start.
     */
    RELAYCTL_AUDIT_HMAC_KEY: z
      .string()
      .refine((v) => /^[A-Za-z0-9+/]+={0,2}$/.test(v) && Buffer.from(v, "base64").length === 32, {
        message: "must be the base64 of exactly 32 bytes (openssl rand -base64 32)",
      })
      .optional(),
    /**
     * GitHub App (README "GitHub App"): its numeric id, slug, private key (PEM
     * file), webhook secret, client id and client secret (the setup URL checks
     * with the installing user's OAuth code that they can access the
     * installation), all six or none. Without them the GitHub endpoints answer
     * 503 RC_ERR_GITHUB_UNCONFIGURED. @default unset
     */
    RELAYCTL_GITHUB_APP_ID: z
      .string()
      .regex(/^\d{1,12}$/, "must be the App's numeric id")
      .optional(),
    RELAYCTL_GITHUB_APP_SLUG: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,99}$/, "must be the App's slug (github.com/apps/<slug>)")
      .optional(),
    RELAYCTL_GITHUB_PRIVATE_KEY_FILE: z.string().optional(),
    RELAYCTL_GITHUB_WEBHOOK_SECRET: z.string().min(16, "must be at least 16 characters").optional(),
    RELAYCTL_GITHUB_CLIENT_ID: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,100}$/, "must be the App's client id (Iv1.… or Iv23…)")
      .optional(),
    RELAYCTL_GITHUB_CLIENT_SECRET: z.string().min(16, "must be at least 16 characters").optional(),
    /** GitHub's REST API (GitHub Enterprise Server: https://HOST/api/v3). @default https://api.github.com */
    RELAYCTL_GITHUB_API_URL: z.url({ protocol: /^https?$/ }).default("https://api.github.com"),
    /** Deadline of a deployment started by a push (seconds). @default 600 */
    RELAYCTL_GITHUB_DEPLOY_TIMEOUT_SECONDS: int(1, 3600).default(600),
    /** Webhook bodies read at once before their signature is known, per api process; 503 beyond. @default 4 */
    RELAYCTL_GITHUB_WEBHOOK_CONCURRENT_BODIES: int(1, 64).default(4),
    /** Webhook requests one source IP may send a minute; 429 beyond. @default 300 */
    RELAYCTL_GITHUB_WEBHOOK_PER_IP_PER_MINUTE: int(1, 100_000).default(300),
    /** GitHub's web address, for install links and the OAuth code exchange (GHES: https://HOST). @default https://github.com */
    RELAYCTL_GITHUB_WEB_URL: z.url({ protocol: /^https?$/ }).default("https://github.com"),
    /**
     * relayctl's public base URL, for the setup redirect back and the link to a
     * deployment in commit statuses, and every URL of relayctl in an answer.
     * Required when RELAYCTL_API_LISTEN is not loopback. @default unset (statuses
     * carry no link; on loopback, URLs come from a localhost Host header)
     */
    RELAYCTL_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
    /**
     * Where applications are served: a URL template whose first host label is
     * `{app}`, e.g. `http://{app}.localhost:8000` (dev) or
     * `https://{app}.apps.example.com` (a wildcard DNS record to the server).
     * Every application then gets the default hostname `<its name as a DNS
     * label>.<domain>` on its route, beside its fqdns (applications/hosts.ts
     * says who keeps a hostname two names map to), and its scheme and port make
     * the applications' `url`s. @default unset (no default hostnames; urls are https://<fqdn>)
     */
    RELAYCTL_APPS_URL: z.string().optional(),
    /**
     * Git sources on the agent's own disk or network: local paths, file://, and
     * hosts that are (or resolve to) loopback, link-local or private addresses.
     * Refused by default: they let a deploy read another application's cache on
     * the server or reach its local services. For tests, `make dev` and mirrors
     * kept on the server. The agent learns it with each deploy job. @default false
     */
    RELAYCTL_ALLOW_LOCAL_GIT_SOURCES: bool.default(false),
    /**
     * The gateway role's own HTTP listener for /metrics, /healthz and /readyz
     * (the api role serves them on its API port): host:port, or `off`. Role
     * `all` serves them on the api only. @default 127.0.0.1:8444
     */
    RELAYCTL_GATEWAY_METRICS_LISTEN: z.union([z.literal("off"), hostPort]).default("127.0.0.1:8444"),
    /**
     * When set, /metrics answers only `Authorization: Bearer <this token>` (401
     * otherwise), on both roles: the api's /metrics shares the public API port,
     * where a firewall cannot tell it apart. @default unset (open; bind or firewall it)
     */
    RELAYCTL_METRICS_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
    /**
     * OpenTelemetry tracing: `otlp` exports spans over OTLP/HTTP to the standard
     * OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT); `off` loads no SDK at all.
     * @default off
     */
    RELAYCTL_TRACING: z.enum(["off", "otlp"]).default("off"),
    /** Application log follows (GET /api/applications/{id}/logs?follow=true) open at once per credential (429 beyond). @default 5 */
    RELAYCTL_LOGS_FOLLOWS_PER_KEY: int(1, 1000).default(5),
    /** Application log follows open at once per tenant (429 beyond). @default 20 */
    RELAYCTL_LOGS_FOLLOWS_PER_TENANT: int(1, 100_000).default(20),
    /** A log follow ends (`event: end`, reason max_time) after this many seconds. @default 3600 */
    RELAYCTL_LOGS_FOLLOW_MAX_SECONDS: int(10, 24 * 3600).default(3600),
    /** Deployment live logs (GET .../deployments/{id}/log) open at once per credential (429 beyond). @default 10 */
    RELAYCTL_LIVE_LOG_STREAMS_PER_KEY: int(1, 1000).default(10),
    /** Deployment live logs open at once per tenant (429 beyond). @default 50 */
    RELAYCTL_LIVE_LOG_STREAMS_PER_TENANT: int(1, 100_000).default(50),
    /** pino log level. @default info */
    RELAYCTL_LOG_LEVEL: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
      .default("info"),
  })
  .refine((c) => c.RELAYCTL_BUS !== "memory" || c.RELAYCTL_ROLE === "all", {
    message: "RELAYCTL_BUS=memory needs RELAYCTL_ROLE=all (the roles share the bus in one process)",
    path: ["RELAYCTL_BUS"],
  })
  .refine((c) => Boolean(c.RELAYCTL_NATS_USER) === Boolean(c.RELAYCTL_NATS_PASSWORD), {
    message: "set both RELAYCTL_NATS_USER and RELAYCTL_NATS_PASSWORD, or neither",
    path: ["RELAYCTL_NATS_USER"],
  })
  .refine((c) => Boolean(c.RELAYCTL_NATS_TLS_CERT_FILE) === Boolean(c.RELAYCTL_NATS_TLS_KEY_FILE), {
    message: "set both RELAYCTL_NATS_TLS_CERT_FILE and RELAYCTL_NATS_TLS_KEY_FILE, or neither",
    path: ["RELAYCTL_NATS_TLS_CERT_FILE"],
  })
  .refine((c) => !c.RELAYCTL_TRUST_PROXY, {
    message:
      "true trusted every hop of X-Forwarded-For and is refused: set RELAYCTL_TRUSTED_PROXIES to your proxies' addresses/CIDRs (or a hop count)",
    path: ["RELAYCTL_TRUST_PROXY"],
  })
  .refine((c) => c.RELAYCTL_HTTP_HEADERS_TIMEOUT_MS <= c.RELAYCTL_HTTP_REQUEST_TIMEOUT_MS, {
    message: "must not exceed RELAYCTL_HTTP_REQUEST_TIMEOUT_MS",
    path: ["RELAYCTL_HTTP_HEADERS_TIMEOUT_MS"],
  })
  .refine(
    (c) =>
      new Set(
        [
          c.RELAYCTL_GITHUB_APP_ID,
          c.RELAYCTL_GITHUB_APP_SLUG,
          c.RELAYCTL_GITHUB_PRIVATE_KEY_FILE,
          c.RELAYCTL_GITHUB_WEBHOOK_SECRET,
          c.RELAYCTL_GITHUB_CLIENT_ID,
          c.RELAYCTL_GITHUB_CLIENT_SECRET,
        ].map(Boolean),
      ).size === 1,
    {
      message:
        "set all of RELAYCTL_GITHUB_APP_ID, _APP_SLUG, _PRIVATE_KEY_FILE, _WEBHOOK_SECRET, _CLIENT_ID and _CLIENT_SECRET, or none",
      path: ["RELAYCTL_GITHUB_APP_ID"],
    },
  )
  .refine((c) => Boolean(c.RELAYCTL_TLS_CERT_FILE) === Boolean(c.RELAYCTL_TLS_KEY_FILE), {
    message: "set both RELAYCTL_TLS_CERT_FILE and RELAYCTL_TLS_KEY_FILE, or neither",
    path: ["RELAYCTL_TLS_CERT_FILE"],
  });

export type Raw = z.infer<typeof schema>;

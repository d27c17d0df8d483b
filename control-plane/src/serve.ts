// `relayctl-server serve`: starts the api role, the gateway role or both, on a
// shared database and job bus, and stops them cleanly on SIGINT/SIGTERM.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { DeployService } from "./deployments/service.js";
import { RolloutService } from "./fleets/rollouts.js";
import type { ForgeIntegration } from "./forges/integration.js";
import type { GitHubIntegration } from "./github/integration.js";
import { recordProgress } from "./deployments/store.js";
import type { JobBus } from "./bus/job-bus.js";
import { MemoryBus } from "./bus/memory-bus.js";
import { connectNatsBus } from "./bus/nats-bus.js";
import { NO_KEY_MESSAGE, resolveAuditKeys, useAuditKeys } from "./audit/chain-key.js";
import { allowLocalGitSources } from "./applications/source.js";
import { type Config, ConfigError } from "./config.js";
import { migrateWithRetry, openDb } from "./db/knex.js";
import { type GatewayServer, startGateway } from "./gateway/server.js";
import { AckWriter } from "./gateway/ack-writer.js";
import { startCredentialWatch } from "./gateway/credential-watch.js";
import { StreamRegistry } from "./gateway/registry.js";
import { commitStart } from "./operations/store.js";
import { CountRefusedError } from "./auth/deferred-count.js";
import { startSweeper } from "./gateway/sweeper.js";
import { createLogger } from "./lib/logger.js";
import { OperationService } from "./operations/service.js";
import type { GatewayHttp } from "./api/gateway-app.js";
import { countDbErrors, observeAgentsConnected } from "./observability/metrics.js";
import { logTracingState, startTracing, stopTracing } from "./tracing/index.js";
import { traceQueries } from "./tracing/knex.js";

/** OpenTelemetry service.name of each role. */
const SERVICE_NAME = { api: "relayctl-api", gateway: "relayctl-gateway", all: "relayctl-server" } as const;
/** control-plane/package.json's version: the file sits one level above both src/ and dist/. */
const VERSION: string = JSON.parse(readFileSync(join(__dirname, "..", "package.json"), "utf8")).version;

export interface Running {
  apiUrl?: string;
  gatewayUrl?: string;
  /** The gateway role's /metrics listener (role gateway only). */
  metricsUrl?: string;
  stop(): Promise<void>;
}

export async function serve(
  config: Config,
  log: Logger = createLogger(config.logLevel, { role: config.role }),
) {
  // Every audit event is keyed; without a key nothing could be audited, so nothing starts.
  const auditKeys = resolveAuditKeys(config);
  if (!auditKeys) throw new ConfigError(NO_KEY_MESSAGE);
  useAuditKeys(auditKeys);
  allowLocalGitSources(config.allowLocalGitSources);
  log.info({ source: auditKeys.source }, "audit chain keyed");
  const serviceName = SERVICE_NAME[config.role];
  startTracing(config.tracing, serviceName, VERSION);
  const db = openDb(config.databaseUrl);
  countDbErrors(db);
  traceQueries(db, config.databaseUrl.startsWith("sqlite:") ? "sqlite" : "mysql");
  await migrateWithRetry(db, log);
  const bus: JobBus =
    config.bus === "memory"
      ? new MemoryBus()
      : await connectNatsBus(config.natsServers, log, `relayctl-${config.role}-${process.pid}`, config.nats);
  log.info({ bus: config.bus }, "job bus ready");
  const ops = new OperationService(db, bus, log.child({ component: "operations" }), config.leaseMs);
  const deploys = new DeployService(
    db,
    bus,
    ops,
    log.child({ component: "deployments" }),
    config.masterKey,
    config.leaseMs,
    config.appsUrl,
  );
  const rollouts = new RolloutService(db, bus, ops, deploys, log.child({ component: "rollouts" }));

  let gateway: GatewayServer | undefined;
  let acks: AckWriter | undefined;
  let stopSweeper = () => {};
  if (config.runsGateway) {
    const gatewayLog = log.child({ component: "gateway" });
    const registry = new StreamRegistry(bus, gatewayLog, async (start) => {
      try {
        await commitStart(db, start);
        return true;
      } catch (err) {
        // Its request's count refused by the guard: the api admits it the full way (auth/deferred-count.ts).
        if (err instanceof CountRefusedError) {
          gatewayLog.debug({ operation_id: start.row.id }, "operation start's count refused; job refused");
          return false;
        }
        gatewayLog.warn({ err, operation_id: start.row.id }, "operation start not committed; job refused");
        return false;
      }
    });
    observeAgentsConnected(() => registry.size);
    acks = new AckWriter(db, log.child({ component: "gateway" }));
    gateway = await startGateway(
      {
        db,
        bus,
        ops,
        registry,
        acks,
        log: log.child({ component: "gateway" }),
        heartbeatIntervalMs: config.heartbeatIntervalMs,
        leaseMs: config.leaseMs,
        progress: async (serverId, p) => {
          if (p.progress?.$case === "deploy") {
            await recordProgress(db, serverId, p.operationId, p.seq, p.progress.deploy);
            // Stored, then announced: live logs read it now (deployments/live-log.ts).
            bus.publishProgress(p.operationId);
          }
        },
      },
      config.gatewayListen,
      config.tls,
      config.grpcReflection,
      config.gatewayMaxHandshakes,
    );
    const stopOpsSweep = startSweeper(
      ops,
      log.child({ component: "sweeper" }),
      config.sweepIntervalMs,
      config.leaseMs,
    );
    // A revoked credential ends its open streams within one heartbeat interval.
    const stopWatch = startCredentialWatch(
      db,
      registry,
      log.child({ component: "gateway" }),
      config.heartbeatIntervalMs,
    );
    stopSweeper = () => {
      stopOpsSweep();
      stopWatch();
    };
    log.info({ url: gateway.url }, "gateway listening");
  }
  // Role all serves /metrics, /healthz and /readyz on its api; a lone gateway on its own listener.
  let gatewayHttp: GatewayHttp | undefined;
  if (config.role === "gateway" && config.metrics.gatewayListen) {
    // Loaded once the gateway listens (as the api's modules below, only by the role that runs
    // them): agents dial back as soon as it does after a restart (bench/agent-fanin.mjs).
    const { startGatewayHttp } = await import("./api/gateway-app.js");
    const health = { db, bus, busName: config.bus === "nats" ? "nats" : "job bus" };
    gatewayHttp = await startGatewayHttp(
      config.metrics.gatewayListen,
      health,
      config.metrics.token,
      log.child({ component: "gateway-http" }),
    );
    log.info({ url: gatewayHttp.url }, "gateway metrics listening");
  }

  let api: FastifyInstance | undefined;
  let stopQueueSweep = () => {};
  let apiUrl: string | undefined;
  let github: GitHubIntegration | undefined;
  let forges: ForgeIntegration | undefined;
  if (config.runsApi) {
    const [
      { buildApi },
      { startForges },
      { previewReviews },
      { startGitHub },
      { SWEEP_MS: PUSH_SWEEP_MS, startQueuedPush, sweepQueuedPushes },
    ] = await Promise.all([
      import("./api/app.js"),
      import("./forges/integration.js"),
      import("./forges/reviews.js"),
      import("./github/integration.js"),
      import("./webhooks/push-queue.js"),
    ]);
    github = await startGitHub(config, db, deploys, rollouts, log.child({ component: "github" }));
    // Pull requests open previews (previews/service.ts) through the same services as the api.
    if (github)
      github.ctx.previews = { config, db, bus, ops, deploys, log: log.child({ component: "previews" }) };
    const forgeLog = log.child({ component: "forges" });
    forges = startForges(
      config,
      db,
      deploys,
      rollouts,
      forgeLog,
      previewReviews({ config, bus, ops, log: forgeLog }),
    );
    const scheme = config.tls ? "grpcs" : "grpc";
    const listenHost = config.gatewayListen.host.includes(":")
      ? `[${config.gatewayListen.host}]`
      : config.gatewayListen.host;
    const gatewayUrls = () =>
      config.publicGatewayUrls ?? [gateway?.url ?? `${scheme}://${listenHost}:${config.gatewayListen.port}`];
    // A fleet application's push that waited for a running rollout goes next (webhooks/push-queue.ts).
    const pushEnv = {
      db,
      deploys,
      rollouts,
      deployTimeoutSeconds: config.githubDeployTimeoutSeconds,
      log: log.child({ component: "push-queue" }),
    };
    rollouts.onEnded = (applicationId) => startQueuedPush(pushEnv, applicationId, pushEnv.log);
    const sweep = setInterval(
      () =>
        void sweepQueuedPushes(pushEnv, pushEnv.log).catch((err) =>
          pushEnv.log.warn({ err }, "sweep failed"),
        ),
      PUSH_SWEEP_MS,
    );
    sweep.unref();
    stopQueueSweep = () => clearInterval(sweep);
    api = await buildApi({ config, db, bus, ops, deploys, rollouts, github, forges }, log, gatewayUrls);
    await api.listen({ host: config.apiListen.host, port: config.apiListen.port });
    const addr = api.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.apiListen.port;
    const host = config.apiListen.host.includes(":") ? `[${config.apiListen.host}]` : config.apiListen.host;
    apiUrl = `http://${host}:${port}`;
    log.info({ url: apiUrl }, "api listening");
  }
  logTracingState(log, serviceName);

  const stop = async () => {
    stopSweeper();
    stopQueueSweep();
    await api?.close().catch(() => {});
    await gatewayHttp?.close().catch(() => {});
    await github?.processor.close();
    await forges?.processor.close();
    // Rollouts first: a stopping rollout starts no new deployment.
    await rollouts.close();
    await deploys.close();
    await gateway?.close().catch(() => {});
    await acks?.flush();
    await bus.close().catch(() => {});
    await db.destroy().catch(() => {});
    await stopTracing();
  };
  return { apiUrl, gatewayUrl: gateway?.url, metricsUrl: gatewayHttp?.url, stop } satisfies Running;
}

// `relayctl-server serve`: starts the api role, the gateway role or both, on a
// shared database and job bus, and stops them cleanly on SIGINT/SIGTERM.
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { buildApi } from "./api/app.js";
import type { JobBus } from "./bus/job-bus.js";
import { MemoryBus } from "./bus/memory-bus.js";
import { connectNatsBus } from "./bus/nats-bus.js";
import { NO_KEY_MESSAGE, resolveAuditKeys, useAuditKeys } from "./audit/chain-key.js";
import { type Config, ConfigError } from "./config.js";
import { type Db, migrateWithRetry, openDb } from "./db/knex.js";
import { type GatewayServer, startGateway } from "./gateway/server.js";
import { AckWriter } from "./gateway/ack-writer.js";
import { StreamRegistry } from "./gateway/registry.js";
import { startSweeper } from "./gateway/sweeper.js";
import { createLogger } from "./lib/logger.js";

export interface Running {
  apiUrl?: string;
  gatewayUrl?: string;
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
  log.info({ source: auditKeys.source }, "audit chain keyed");
  const db = openDb(config.databaseUrl);
  await migrateWithRetry(db, log);
  const bus: JobBus =
    config.bus === "memory"
      ? new MemoryBus()
      : await connectNatsBus(config.natsServers, log, `relayctl-${config.role}-${process.pid}`);
  log.info({ bus: config.bus }, "job bus ready");

  let gateway: GatewayServer | undefined;
  let acks: AckWriter | undefined;
  let stopSweeper = () => {};
  if (config.runsGateway) {
    const registry = new StreamRegistry(bus, log.child({ component: "gateway" }));
    acks = new AckWriter(db, log.child({ component: "gateway" }));
    gateway = await startGateway(
      {
        db,
        bus,
        registry,
        acks,
        log: log.child({ component: "gateway" }),
        heartbeatIntervalMs: config.heartbeatIntervalMs,
        leaseMs: config.leaseMs,
      },
      config.gatewayListen,
      config.tls,
    );
    stopSweeper = startSweeper(
      db,
      bus,
      log.child({ component: "sweeper" }),
      config.sweepIntervalMs,
      config.leaseMs,
    );
    log.info({ url: gateway.url }, "gateway listening");
  }

  let api: FastifyInstance | undefined;
  let apiUrl: string | undefined;
  if (config.runsApi) {
    const scheme = config.tls ? "grpcs" : "grpc";
    const listenHost = config.gatewayListen.host.includes(":")
      ? `[${config.gatewayListen.host}]`
      : config.gatewayListen.host;
    const gatewayUrls = () =>
      config.publicGatewayUrls ?? [gateway?.url ?? `${scheme}://${listenHost}:${config.gatewayListen.port}`];
    api = await buildApi({ config, db, bus, readResult: (id) => readResult(db, id) }, log, gatewayUrls);
    await api.listen({ host: config.apiListen.host, port: config.apiListen.port });
    const addr = api.server.address();
    const port = typeof addr === "object" && addr ? addr.port : config.apiListen.port;
    const host = config.apiListen.host.includes(":") ? `[${config.apiListen.host}]` : config.apiListen.host;
    apiUrl = `http://${host}:${port}`;
    log.info({ url: apiUrl }, "api listening");
  }

  const stop = async () => {
    stopSweeper();
    await api?.close().catch(() => {});
    await gateway?.close().catch(() => {});
    await acks?.flush();
    await bus.close().catch(() => {});
    await db.destroy().catch(() => {});
  };
  return { apiUrl, gatewayUrl: gateway?.url, stop } satisfies Running;
}

async function readResult(db: Db, id: string) {
  const row = await db("operations").where({ id }).first<{
    exit_code: number | null;
    stdout: string | null;
    stderr: string | null;
    duration_ms: number | null;
    error: string | null;
  }>("exit_code", "stdout", "stderr", "duration_ms", "error");
  return {
    exit_code: row?.exit_code ?? -1,
    stdout: row?.stdout ?? "",
    stderr: row?.stderr ?? row?.error ?? "",
    duration_ms: row?.duration_ms ?? 0,
  };
}

// One agent's bidirectional stream: authenticate the rag_ credential, take the
// Hello, register with the StreamRegistry, then handle acks, heartbeats and
// results. A result is stored before it is acked to the agent and announced on
// the bus, so nothing reported is ever lost between the two.
import { randomUUID } from "node:crypto";
import { type ServerDuplexStream, status as GrpcStatus } from "@grpc/grpc-js";
import type { AgentMessage, GatewayMessage, Hello, JobProgress, JobResult } from "@relayctl/proto";
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { Job, JobBus } from "../bus/job-bus.js";
import { sha256Hex } from "../lib/secrets.js";
import type { OperationService } from "../operations/service.js";
import { renewLeases } from "../operations/store.js";
import { completeReboots } from "../reboot/completion.js";
import type { AckWriter } from "./ack-writer.js";
import { Coalescer } from "../lib/coalescer.js";
import { finalResult } from "./convert.js";
import { engineColumns, storeEngineStatus } from "./engine-status.js";
import { proxyColumns, storeProxyStatus } from "./proxy-status.js";
import { storeContainerReport } from "./container-report.js";
import { pendingCleanups, requestCleanup } from "../applications/cleanup.js";
import type { StreamRegistry } from "./registry.js";
import { LiveReads } from "./live-reads.js";
import { Presence } from "./presence.js";
import { StreamLog } from "./stream-log.js";

export interface GatewayDeps {
  db: Knex;
  bus: JobBus;
  ops: OperationService;
  registry: StreamRegistry;
  acks: AckWriter;
  log: Logger;
  heartbeatIntervalMs: number;
  leaseMs: number;
  /** Records a running job's progress (a deployment's steps and log). */
  progress?: (serverId: string, p: JobProgress) => Promise<void>;
  /** The least silence that closes an agent's stream (AGENT_SILENCE_FLOOR_MS; a test's own). */
  agentSilenceFloorMs?: number;
  /** Told when a connection's handshake is over, by its peer (handshake-gate.ts). */
  handshakes?: { done(peer: string): void };
}

type Call = ServerDuplexStream<AgentMessage, GatewayMessage>;

const HELLO_TIMEOUT_MS = 10_000;

/**
 * An agent that sent nothing (it heartbeats every interval) for this many intervals, and at least
 * AGENT_SILENCE_FLOOR_MS, is taken for gone and its stream closed (registry.closeWhenSilent): 30 s
 * with the default 5-s interval, as long as grpc-js's keepalive took (a ping after 20 s, 10 s for
 * its answer). The floor keeps a short interval (tests use 300 ms) from closing the stream of an
 * agent slowed down by a loaded machine.
 */
export const AGENT_SILENCE_INTERVALS = 6;
export const AGENT_SILENCE_FLOOR_MS = 30_000;
/** How often silent streams are looked for, at most. */
const SILENCE_CHECK_MS = 5000;

export function agentSilenceLimitMs(heartbeatIntervalMs: number, floorMs = AGENT_SILENCE_FLOOR_MS): number {
  return Math.max(floorMs, AGENT_SILENCE_INTERVALS * heartbeatIntervalMs);
}

interface ServerRow {
  id: string;
  tenant_id: string;
  name: string;
  agent_credential_hash: string;
}

export function handleConnect(deps: GatewayDeps, call: Call): void {
  const fail = (code: GrpcStatus, details: string): void => {
    call.emit("error", { code, details });
  };
  const silenceMs = agentSilenceLimitMs(deps.heartbeatIntervalMs, deps.agentSilenceFloorMs);
  deps.registry.closeWhenSilent(silenceMs, Math.min(SILENCE_CHECK_MS, silenceMs / AGENT_SILENCE_INTERVALS));
  const header = String(call.metadata.get("authorization")[0] ?? "");
  const token = /^Bearer\s+(rag_\S+)$/i.exec(header)?.[1];
  if (!token) {
    fail(GrpcStatus.UNAUTHENTICATED, "missing agent credential (authorization: Bearer rag_...)");
    return;
  }
  batchesOf(deps)
    .credentials.submit(sha256Hex(token))
    .then(
      (server) => {
        if (server) new AgentStream(deps, call, server).start();
        else fail(GrpcStatus.UNAUTHENTICATED, "unknown or revoked agent credential");
      },
      (err) => {
        deps.log.error({ err }, "credential lookup failed");
        fail(GrpcStatus.UNAVAILABLE, "control plane database unavailable");
      },
    );
}

interface HelloWrite {
  serverId: string;
  fields: Record<string, string | number>;
}

/**
 * The per-agent database work of a connect, batched across agents (coalescer.ts):
 * after a gateway restart thousands of agents come back within seconds, and one
 * lookup and one write each would queue them all on the connection pool.
 */
interface ConnectBatches {
  credentials: Coalescer<string, ServerRow | undefined>;
  hellos: Coalescer<HelloWrite, undefined>;
  /** Whether the server has a reboot running (only then is a Hello checked for a completed reboot). */
  reboots: Coalescer<string, boolean>;
  /** Whether the server's agent owes a cleanup (only then are they read and sent). */
  cleanups: Coalescer<string, boolean>;
}

/**
 * Batches of each kind in flight at once (of the pool's 30 connections). A stream's Hello is
 * written once; a server whose agent reconnected within one batch's time (milliseconds) may keep
 * the older stream's columns (boot id, times of the same moment): the registry's takeover
 * (newest stream wins) and a reboot's completion (the Hello's own boot id) never read them.
 */
const CONNECT_BATCHES = 4;
/**
 * Items waiting that open a batch beyond the first, and how long a first batch waits for more
 * (coalescer.ts, spareAt and lingerMs): a connect is not a request anybody waits on by the
 * millisecond, and agents that come one at a time then share a statement.
 */
const CONNECT_BATCH_SPARE_AT = 32;
const CONNECT_BATCH_LINGER_MS = 5;

const batches = new WeakMap<GatewayDeps, ConnectBatches>();

function batchesOf(deps: GatewayDeps): ConnectBatches {
  const known = batches.get(deps);
  if (known) return known;
  const { db } = deps;
  const b: ConnectBatches = {
    credentials: new Coalescer(
      async (hashes) => {
        const rows = await db("servers")
          .whereIn("agent_credential_hash", [...new Set(hashes)])
          .select<ServerRow[]>("id", "tenant_id", "name", "agent_credential_hash");
        const byHash = new Map(rows.map((r) => [r.agent_credential_hash, r]));
        return hashes.map((h) => byHash.get(h));
      },
      500,
      CONNECT_BATCHES,
      CONNECT_BATCH_SPARE_AT,
      CONNECT_BATCH_LINGER_MS,
    ),
    hellos: new Coalescer(
      async (writes) => {
        // One transaction (one durable commit) for the batch; on MySQL one round trip too.
        await db.transaction(async (trx) => {
          const updates = writes.map((w) => trx("servers").where({ id: w.serverId }).update(w.fields));
          if (trx.client.config.client !== "mysql2") {
            for (const u of updates) await u;
            return;
          }
          const compiled = updates.map((u) => u.toSQL().toNative());
          await trx.raw(
            compiled.map((c) => c.sql).join(";\n"),
            compiled.flatMap((c) => c.bindings) as Knex.RawBinding[],
          );
        });
        return writes.map(() => undefined);
      },
      200,
      CONNECT_BATCHES,
      CONNECT_BATCH_SPARE_AT,
      CONNECT_BATCH_LINGER_MS,
    ),
    reboots: new Coalescer(
      async (serverIds) => {
        const rows = await db("operations")
          .whereIn("server_id", [...new Set(serverIds)])
          .where({ status: "running", operation_type: "reboot" })
          .distinct<{ server_id: string }[]>("server_id");
        const rebooting = new Set(rows.map((r) => r.server_id));
        return serverIds.map((id) => rebooting.has(id));
      },
      500,
      CONNECT_BATCHES,
      CONNECT_BATCH_SPARE_AT,
      CONNECT_BATCH_LINGER_MS,
    ),
    cleanups: new Coalescer(
      async (serverIds) => {
        const rows = await db("application_cleanups")
          .whereIn("server_id", [...new Set(serverIds)])
          .distinct<{ server_id: string }[]>("server_id");
        const owing = new Set(rows.map((r) => r.server_id));
        return serverIds.map((id) => owing.has(id));
      },
      500,
      CONNECT_BATCHES,
      CONNECT_BATCH_SPARE_AT,
      CONNECT_BATCH_LINGER_MS,
    ),
  };
  batches.set(deps, b);
  return b;
}

class AgentStream {
  readonly connectionId = randomUUID();
  readonly serverId: string;
  /** The server's tenant: a start sent with a job must be this tenant's (registry.ts). */
  readonly tenantId: string;
  /** The credential this stream authenticated with (credential-watch.ts checks it still holds). */
  readonly credentialHash: string;
  /** Its lines name the server and connection (no pino child per stream: stream-log.ts). */
  private readonly log: StreamLog;
  private closed = false;
  private hello = false;
  /**
   * What was for the agent before its Welcome was written (jobs the bus delivered while the
   * registry's subscriptions were being confirmed): written right after it, in order. Undefined
   * once welcomed.
   */
  private beforeWelcome: GatewayMessage[] | undefined = [];
  /** When the agent last sent a message (registry.closeWhenSilent reads it). */
  lastHeardAt = Date.now();
  /**
   * This stream's progress writes, chained in the order the agent sent them: a
   * live-log follower reads a deployment's progress by seq, so a message stored
   * after a later one would be skipped for good.
   */
  private progressTail: Promise<unknown> = Promise.resolve();
  /** Log reads on this stream: relayed, not stored. */
  private readonly live: LiveReads;
  /** Stores the last heartbeat's time, throttled (presence.ts). */
  private readonly presence: Presence;

  constructor(
    private readonly deps: GatewayDeps,
    private readonly call: Call,
    private readonly server: ServerRow,
  ) {
    this.serverId = server.id;
    this.tenantId = server.tenant_id;
    this.credentialHash = server.agent_credential_hash;
    this.log = new StreamLog(deps.log, server.id, this.connectionId);
    this.live = new LiveReads(deps.bus);
    this.presence = new Presence(deps.db, server.id, deps.heartbeatIntervalMs);
  }

  start(): void {
    const helloTimer = setTimeout(() => {
      if (!this.hello) this.close("no Hello within 10 s");
    }, HELLO_TIMEOUT_MS);
    this.call.on("data", (m: AgentMessage) => this.onMessage(m));
    this.call.on("end", () => this.deps.registry.detach(this, "agent ended the stream"));
    this.call.on("error", () => this.deps.registry.detach(this, "stream error"));
    this.call.on("close", () => {
      clearTimeout(helloTimer);
      this.deps.registry.detach(this, "stream closed");
    });
  }

  sendJob(job: Job): boolean {
    if (this.closed) return false;
    this.write({ msg: { $case: "job", job } });
    this.live.sent(job);
    return true;
  }

  cancelJob(operationId: string): void {
    if (!this.closed) this.write({ msg: { $case: "cancelJob", cancelJob: { operationId } } });
  }

  /** To the agent, after its Welcome: kept until the Welcome is written. */
  private write(m: GatewayMessage): void {
    if (this.beforeWelcome) this.beforeWelcome.push(m);
    else this.call.write(m);
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.live.closed();
    this.log.perConnection({ reason }, "agent stream closed");
    try {
      this.call.end();
    } catch {
      // already gone
    }
  }

  private onMessage(m: AgentMessage): void {
    this.lastHeardAt = Date.now();
    const msg = m.msg;
    if (!msg) return;
    const work =
      msg.$case === "heartbeat"
        ? this.onHeartbeat(msg.heartbeat.runningOperationIds)
        : msg.$case === "hello"
          ? this.onHello(msg.hello).catch((err) => this.helloFailed(err))
          : msg.$case === "jobAck"
            ? this.onAck(msg.jobAck.operationId)
            : msg.$case === "jobProgress"
              ? this.onProgress(msg.jobProgress)
              : msg.$case === "engineStatus"
                ? storeEngineStatus(this.deps.db, this.serverId, msg.engineStatus)
                : msg.$case === "proxyStatus"
                  ? storeProxyStatus(this.deps.db, this.serverId, msg.proxyStatus)
                  : msg.$case === "containerReport"
                    ? storeContainerReport(this.deps.db, this.serverId, msg.containerReport)
                    : msg.$case === "logsOutput"
                      ? Promise.resolve(this.live.relay(msg.logsOutput))
                      : this.onResult(msg.jobResult);
    // A heartbeat with nothing to store comes without a promise (most of them: see onHeartbeat).
    work?.catch((err) => this.log.error({ err, kind: msg.$case }, "agent message handling failed"));
  }

  /**
   * A Hello that could not be stored, or whose checks failed, before its Welcome (the database
   * away, or too slow to give a connection in a reconnect storm): the stream is ended at once with
   * UNAVAILABLE, so the agent dials again on its schedule. Left open without a Welcome, it held the
   * agent until the agent's own Welcome timeout.
   */
  private helloFailed(err: unknown): void {
    // After the Welcome (its pending cleanups' sending) a failure is only logged, as before.
    if (this.beforeWelcome === undefined) {
      this.log.error({ err, kind: "hello" }, "agent message handling failed");
      return;
    }
    this.log.error({ err }, "agent's Hello not stored; its stream is ended so that it dials again");
    if (this.closed) return;
    this.call.emit("error", {
      code: GrpcStatus.UNAVAILABLE,
      details: "control plane database unavailable, retry",
    });
  }

  private async onHello(h: Hello): Promise<void> {
    if (this.hello) return;
    this.hello = true;
    const connect = batchesOf(this.deps);
    const now = Date.now();
    await connect.hellos.submit({
      serverId: this.serverId,
      fields: {
        boot_id: h.bootId.slice(0, 64),
        hostname: h.hostname.slice(0, 255),
        agent_version: h.agentVersion.slice(0, 64),
        last_seen_at: now,
        connected_at: now,
        // 0 from an agent older than booted_at_unix_ms: the last known boot is kept.
        ...(h.bootedAtUnixMs > 0 ? { booted_at: h.bootedAtUnixMs } : {}),
        // Absent until the agent's first probe ends (an EngineStatus follows) or from an older agent.
        ...(h.engine ? engineColumns(h.engine) : {}),
        // Likewise until the agent's first proxy check ends.
        ...(h.proxy ? proxyColumns(h.proxy) : {}),
      },
    });
    await renewLeases(this.deps.db, this.serverId, h.runningOperationIds, this.deps.leaseMs);
    if (await connect.reboots.submit(this.serverId))
      await completeReboots(this.deps.ops, this.log.child(), this.serverId, h.bootId.slice(0, 64));
    if (this.closed) return;
    // Subscribed and confirmed by the bus first: an agent welcomed, or a dashboard showing it
    // connected, before an api could reach it would answer "not connected" to the first exec.
    await this.deps.registry.attach(this);
    if (this.closed) return;
    this.call.write({
      msg: {
        $case: "welcome",
        welcome: {
          serverId: this.serverId,
          serverName: this.server.name,
          heartbeatIntervalMs: this.deps.heartbeatIntervalMs,
        },
      },
    });
    this.deps.handshakes?.done(this.call.getPeer());
    const kept = this.beforeWelcome ?? [];
    this.beforeWelcome = undefined;
    for (const m of kept) this.call.write(m);
    this.log.perConnection({ boot_id: h.bootId, running: h.runningOperationIds.length }, "agent connected");
    await this.sendPendingCleanups();
  }

  /** Deletions made while the agent was away: their containers and images go now (applications/cleanup.ts). */
  private async sendPendingCleanups(): Promise<void> {
    // Rare, and asked of every agent at its Hello: one batched question first, not one join each.
    if (!(await batchesOf(this.deps).cleanups.submit(this.serverId))) return;
    const audit = { reason: "application deleted while its server's agent was away; sent at its Hello" };
    for (const target of await pendingCleanups(this.deps.db, this.serverId)) {
      if (this.closed) return;
      const outcome = await requestCleanup(this.deps.ops, target, audit, 0);
      this.log.info({ application_id: target.applicationId, outcome: outcome.state }, "pending cleanup sent");
    }
  }

  /**
   * Renews the leases of the operations the agent runs, then stores its presence when due.
   * Undefined when there is neither (five heartbeats of six of an idle agent): the most frequent
   * message makes no promise then.
   */
  private onHeartbeat(runningOperationIds: string[]): Promise<void> | undefined {
    if (runningOperationIds.length === 0) return this.presence.heartbeat();
    return renewLeases(this.deps.db, this.serverId, runningOperationIds, this.deps.leaseMs).then(() =>
      this.presence.heartbeat(),
    );
  }

  private async onAck(operationId: string): Promise<void> {
    this.deps.registry.acked(this.serverId, operationId);
    this.deps.acks.add(this.serverId, operationId);
  }

  /** Best effort (the final result carries the whole report): a failure is logged, never fatal. */
  private onProgress(p: JobProgress): Promise<void> {
    const write = this.progressTail.then(() => this.deps.progress?.(this.serverId, p));
    // A failed write (logged by onMessage) does not hold up the next.
    this.progressTail = write.catch(() => undefined);
    return write;
  }

  private async onResult(r: JobResult): Promise<void> {
    // After the progress sent before it: a follower stops reading once the operation is finished.
    await this.progressTail;
    try {
      // Only this server's own running operations can be finished by it. Stored,
      // then announced (the service), then acked: a result is never lost between.
      const hint = this.deps.registry.takeHint(r.operationId);
      await this.deps.ops.complete(r.operationId, finalResult(r), this.serverId, this.server.tenant_id, hint);
    } catch (err) {
      // Not acked: drop the stream so the agent reconnects and re-sends it.
      this.log.error({ err, operation_id: r.operationId }, "storing result failed; dropping stream");
      this.call.emit("error", { code: GrpcStatus.UNAVAILABLE, details: "result not stored, retry" });
      return;
    }
    this.deps.registry.acked(this.serverId, r.operationId);
    this.deps.acks.settled(this.serverId, r.operationId);
    if (!this.closed)
      this.call.write({ msg: { $case: "resultAck", resultAck: { operationId: r.operationId } } });
  }
}

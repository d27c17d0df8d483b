// Which agent streams this gateway holds. For each connected server it serves the
// server's job subject on the bus and listens for takeovers: the newest stream of
// a server wins, here or on another gateway. Jobs not yet acked by the agent are
// kept (in memory only: they may hold env values) and re-sent on its next stream.
import type { Logger } from "pino";
import type { JobBus, Job, Unsubscribe } from "../bus/job-bus.js";
import type { JobHint } from "../bus/job-hint.js";
import type { JobStart } from "../bus/job-start.js";
import { activeTraceContext, tracingOn } from "../tracing/index.js";

export interface StreamHandle {
  readonly connectionId: string;
  readonly serverId: string;
  /** The server's tenant, when known: a job's start (bus/job-start.ts) of another tenant is refused. */
  readonly tenantId?: string;
  /** Hash of the agent credential the stream authenticated with. */
  readonly credentialHash: string;
  /**
   * When the agent last sent anything on the stream (Date.now()). An agent heartbeats every
   * interval, so a long silence means it is gone (closeWhenSilent). Absent: never closed for it.
   */
  readonly lastHeardAt?: number;
  /** Puts the job on the stream; false when the stream is gone. */
  sendJob(job: Job): boolean;
  /** Asks the agent to stop a job (a log read's follow). */
  cancelJob(operationId: string): void;
  close(reason: string): void;
}

interface Held {
  stream: StreamHandle;
  unsubscribe: Unsubscribe[];
}

const UNACKED_TTL_MS = 10 * 60 * 1000;
/** How long an attach waits for the bus to confirm its subscriptions (subscribed()). */
const SUBSCRIBE_WAIT_MS = 5_000;

/** Hints kept at most (jobs in flight on this gateway's streams; ~200 bytes each). */
const MAX_HINTS = 20_000;

/**
 * Hints kept with a settlement plan at most (an external-deploy sync's: ~300 bytes an entry,
 * up to ~60 KB). Past it a hint is kept without its plan: that completion is not settled here,
 * and its api stores the settlement itself (external-deploy/settle.ts).
 */
const MAX_SETTLEMENTS = 1_000;

/** What closeWhenSilent keeps while streams are held. */
interface SilenceWatch {
  limitMs: number;
  everyMs: number;
  now: () => number;
  timer: NodeJS.Timeout | undefined;
  lastCheck: number;
}

export class StreamRegistry {
  private readonly held = new Map<string, Held>();
  private readonly unacked = new Map<string, Map<string, { job: Job; at: number }>>();
  /** Operation id → what the api told with its job (bus/job-hint.ts), until its result. */
  private readonly hints = new Map<string, JobHint>();
  /** The operations whose hint holds a settlement plan. */
  private readonly settling = new Set<string>();
  private silence: SilenceWatch | undefined;
  /** The bus round trip that the attaches of this tick wait for (subscribed()). */
  private subscribing: Promise<void> | undefined;

  constructor(
    private readonly bus: JobBus,
    private readonly log: Logger,
    /**
     * Commits a job's operation start (bus/job-start.ts) before the job goes on the stream;
     * false when it could not be. Without it, a job with a start is refused: nothing runs
     * unaudited.
     */
    private readonly commitStart?: (start: JobStart) => Promise<boolean>,
  ) {}

  get size(): number {
    return this.held.size;
  }

  /** Servers with jobs kept for a re-send (each holds a Map; registry.test.ts reads it). */
  get serversWithUnacked(): number {
    return this.unacked.size;
  }

  /**
   * Takes the server's jobs and presence probes on this stream. Resolves once the bus server
   * holds the subscriptions (one round trip, shared by the attaches of a tick): until then an
   * api asking for the server would hear "no responders", so the stream's Welcome, after which
   * the agent and the people watching it take it for connected, waits for this. Jobs that come
   * meanwhile go to the stream, which keeps them until its Welcome is written (agent-stream.ts).
   */
  attach(stream: StreamHandle): Promise<void> {
    const previous = this.held.get(stream.serverId);
    if (previous) this.detach(previous.stream, "replaced by a newer stream of the same agent");
    const unsubscribe = [
      this.bus.serveServer(stream.serverId, async (job, hint, start) => {
        if (!start) return this.deliver(stream.serverId, job, hint);
        // A start in another tenant's chain than the server's is no start of this server's.
        if (stream.tenantId !== undefined && start.row.tenant_id !== stream.tenantId) {
          this.log.error(
            { operation_id: job.operationId, server_id: stream.serverId },
            "job with a start of another tenant than its server's; refused",
          );
          return false;
        }
        // Committed only while the stream is held: a refusal then leaves the start to its api.
        if (!this.held.has(stream.serverId) || !(await this.commitStart?.(start))) return false;
        return this.deliver(stream.serverId, job, hint);
      }),
      this.bus.onTakeover(stream.serverId, (connectionId) => {
        if (connectionId !== stream.connectionId) this.detach(stream, "agent connected to another gateway");
      }),
      this.bus.onCancel(stream.serverId, (operationId) => stream.cancelJob(operationId)),
    ];
    this.held.set(stream.serverId, { stream, unsubscribe });
    this.watchSilence();
    this.bus.publishTakeover(stream.serverId, stream.connectionId);
    for (const { job } of this.pendingFor(stream.serverId)) stream.sendJob(job);
    return this.subscribed();
  }

  /**
   * Resolves once the bus server has every subscription made before the call: one ping, shared
   * by the calls made before it is sent (NATS handles a connection's messages in order, so a
   * PONG answers for every SUB written before its PING). In a reconnect storm of 10,000 agents
   * that is one round trip per tick, not one per agent. A bus that does not answer within
   * SUBSCRIBE_WAIT_MS is logged and not waited for: the client sends the subscriptions when it
   * reconnects, and an agent kept without its Welcome would only reconnect.
   */
  private subscribed(): Promise<void> {
    this.subscribing ??= Promise.resolve().then(async () => {
      this.subscribing = undefined;
      try {
        await this.bus.ping(SUBSCRIBE_WAIT_MS);
      } catch (err) {
        this.log.warn(
          { err },
          "the bus did not confirm a stream's subscriptions; the agent is welcomed anyway",
        );
      }
    });
    return this.subscribing;
  }

  /** Forgets the stream (if it is still the current one) and closes it. */
  detach(stream: StreamHandle, reason: string): void {
    const current = this.held.get(stream.serverId);
    if (current?.stream === stream) {
      this.held.delete(stream.serverId);
      for (const u of current.unsubscribe) u();
      if (this.held.size === 0) this.watchSilence();
    }
    stream.close(reason);
  }

  /**
   * Closes a held stream whose agent sent nothing for `limitMs`, looked for every `everyMs`: how a
   * gateway finds an agent gone without a word (its host off, the network cut). Agents heartbeat
   * every interval, so this needs no traffic of its own, where an HTTP/2 ping per connection (what
   * found them before: grpc-js's keepalive every 20 s) cost a timer, a write and a read for each
   * (at 10,000 agents 500 a second, 12-17 % of the gateway's CPU between heartbeats). The first
   * call sets it; the timer runs while streams are held.
   */
  closeWhenSilent(limitMs: number, everyMs: number, now: () => number = Date.now): void {
    if (this.silence) return;
    this.silence = { limitMs, everyMs, now, timer: undefined, lastCheck: 0 };
    this.watchSilence();
  }

  /**
   * One look for silent streams (closeWhenSilent's timer; a test's own clock calls it): closes
   * those silent past the limit, returns how many. A look that comes late (this process did not
   * run for a while: a long pause, a machine starved of CPU) closes nothing: what the agents sent
   * meanwhile may still be unread in the sockets, and the next look, on time, decides.
   */
  closeSilent(): number {
    const s = this.silence;
    if (!s) return 0;
    const now = s.now();
    const late = now - s.lastCheck > 2 * s.everyMs;
    s.lastCheck = now;
    if (late) return 0;
    const cutoff = now - s.limitMs;
    let closed = 0;
    // Deleting the entry being visited is safe in a Map's iteration; detach adds none.
    for (const { stream } of this.held.values()) {
      if (stream.lastHeardAt === undefined || stream.lastHeardAt >= cutoff) continue;
      this.detach(stream, `nothing from the agent for ${Math.round((now - stream.lastHeardAt) / 1000)} s`);
      closed++;
    }
    return closed;
  }

  /** Runs the silence timer while streams are held (none when no stream is: no wakeups then). */
  private watchSilence(): void {
    const s = this.silence;
    if (!s) return;
    if (this.held.size === 0) {
      clearInterval(s.timer);
      s.timer = undefined;
    } else if (!s.timer) {
      s.lastCheck = s.now();
      s.timer = setInterval(() => this.closeSilent(), s.everyMs);
      s.timer.unref();
    }
  }

  /** What the api told with the operation's job, once (its completion's); undefined when none was. */
  takeHint(operationId: string): JobHint | undefined {
    const hint = this.hints.get(operationId);
    this.dropHint(operationId);
    return hint;
  }

  private dropHint(operationId: string): void {
    this.hints.delete(operationId);
    this.settling.delete(operationId);
  }

  private keepHint(operationId: string, hint: JobHint): void {
    if (this.hints.size >= MAX_HINTS) this.dropHint(this.hints.keys().next().value!);
    let kept = hint;
    if (hint.settle !== undefined) {
      if (this.settling.size < MAX_SETTLEMENTS) this.settling.add(operationId);
      else {
        const { settle: _plan, ...rest } = hint;
        kept = rest;
      }
    }
    this.hints.set(operationId, kept);
  }

  acked(serverId: string, operationId: string): void {
    this.forget(serverId, operationId);
  }

  /**
   * A server's Map goes with its last job: a gateway that runs for weeks meets every server of its
   * fleet with a job or two, and an empty Map kept for each of 10,000 is memory for nothing.
   */
  private forget(serverId: string, operationId: string): void {
    const pending = this.unacked.get(serverId);
    if (!pending) return;
    pending.delete(operationId);
    if (pending.size === 0) this.unacked.delete(serverId);
  }

  /** The streams held now. */
  streams(): StreamHandle[] {
    return [...this.held.values()].map((h) => h.stream);
  }

  closeAll(reason: string): void {
    for (const { stream } of [...this.held.values()]) this.detach(stream, reason);
  }

  private deliver(serverId: string, job: Job, hint?: JobHint): boolean {
    const current = this.held.get(serverId);
    if (!current) return false;
    // Kept until the result comes (on any stream of this gateway), oldest dropped past the cap: a
    // job whose result never comes here leaves only a guess, and a missing one costs one round trip.
    // A log read's result is not the completion path's: it needs none.
    if (hint && job.kind?.$case !== "logs") this.keepHint(job.operationId, hint);
    // The agent's spans are children of this gateway's (kept for a re-send too).
    if (tracingOn()) job.traceContext = activeTraceContext();
    // A log read is never sent again: it ended with the stream it was on (gateway/live-reads.ts).
    if (job.kind?.$case === "logs") return current.stream.sendJob(job);
    let pending = this.unacked.get(serverId);
    if (!pending) {
      pending = new Map();
      this.unacked.set(serverId, pending);
    }
    pending.set(job.operationId, { job, at: Date.now() });
    const sent = current.stream.sendJob(job);
    // A refused job is answered "not connected" and recorded failed: never re-send it.
    if (!sent) {
      this.forget(serverId, job.operationId);
      this.dropHint(job.operationId);
    }
    this.log.debug({ operation_id: job.operationId, server_id: serverId, on_stream: sent }, "job to agent");
    return sent;
  }

  private pendingFor(serverId: string): { job: Job }[] {
    const pending = this.unacked.get(serverId);
    if (!pending) return [];
    const cutoff = Date.now() - UNACKED_TTL_MS;
    for (const [id, p] of pending) if (p.at < cutoff) pending.delete(id);
    if (pending.size === 0) this.unacked.delete(serverId);
    return [...pending.values()];
  }
}

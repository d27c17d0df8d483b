// JobBus over core NATS: request/reply for dispatch (the reply is the gateway's
// ack; "no responders" means no gateway holds the agent), pub/sub for completions
// and takeovers. The client reconnects forever and restores subscriptions, so a
// NATS restart needs no restart of ours.
import type { Logger } from "pino";
import { readFileSync } from "node:fs";
import {
  type ConnectionOptions,
  type MsgHdrs,
  type NatsConnection,
  RequestStrategy,
  connect,
  nuid,
  credsAuthenticator,
  ErrorCode as NatsErrorCode,
} from "nats";
import type { NatsOptions } from "../config.js";
import { natsErrors } from "../observability/metrics.js";
import { tracedJobHandling, tracedJobRequest } from "../tracing/nats.js";
import { codec } from "./codec.js";
import { type JobHint, hintOf, withHint } from "./job-hint.js";
import { type JobStart, startOf, withStart } from "./job-start.js";
import { ServerFanout } from "./server-fanout.js";
import {
  BusUnavailableError,
  type DispatchOutcome,
  type DoneWaiter,
  type Job,
  type JobBus,
  type JobHandler,
  type LogsOutput,
  type OperationDone,
  type Unsubscribe,
  REFUSALS_PREFIX,
  subjects,
} from "./job-bus.js";

const DISPATCH_ACK_TIMEOUT_MS = 5000;
/** dispatchToAll: how long after an answer another gateway's is still waited for. */
const MORE_ANSWERS_MS = 250;
/** A presence probe is answered at once by a live gateway; a silent one is not holding the stream. */
const PRESENCE_TIMEOUT_MS = 1000;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from NATS within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Credentials and TLS as nats.js takes them; secrets never reach a log line. */
function securityOptions(o: NatsOptions): Partial<ConnectionOptions> {
  const opts: Partial<ConnectionOptions> = {};
  if (o.credsFile) opts.authenticator = credsAuthenticator(readFileSync(o.credsFile));
  if (o.user) Object.assign(opts, { user: o.user, pass: o.password });
  if (o.token) opts.token = o.token;
  if (o.tls) opts.tls = { caFile: o.tls.caFile, certFile: o.tls.certFile, keyFile: o.tls.keyFile };
  return opts;
}

const isLoopback = (url: string) => /^(nats|tls):\/\/([^@]*@)?(127\.|localhost|\[::1\])/.test(url);

export async function connectNatsBus(
  servers: string[],
  log: Logger,
  name: string,
  security: NatsOptions = {},
): Promise<JobBus> {
  log.info(
    { servers: servers.map((u) => u.replace(/\/\/[^@/]*@/, "//***@")), tls: Boolean(security.tls) },
    "connecting to NATS (waits until one answers)",
  );
  if (!security.tls && !servers.every(isLoopback)) {
    log.warn(
      "NATS without TLS off this host: jobs carry env values and registry passwords; set RELAYCTL_NATS_TLS_CA_FILE",
    );
  }
  const nc = await connect({
    ...securityOptions(security),
    servers,
    name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    reconnectJitter: 100,
    pingInterval: 5000,
    waitOnFirstConnect: true,
    // nats.js otherwise makes an Error (a stack capture) on every request and publish, only to
    // show where an async failure began: ~4 % of the api's CPU under exec load (bench/README.md,
    // fourth wave). Errors keep their codes (NoResponders, Timeout), which is all we read.
    noAsyncTraces: true,
  });
  const bus = new NatsBus(nc, log);
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "error" || s.type === "disconnect") natsErrors.inc({ kind: s.type });
      if (s.type !== "disconnect" && s.type !== "reconnect") continue;
      bus.connected = s.type === "reconnect";
      log.warn({ nats: s.type }, `nats ${s.type}`);
    }
  })().catch(() => {});
  return bus;
}

interface Waiting {
  done: (e: OperationDone) => void;
  refused: () => void;
}

class NatsBus implements JobBus {
  /** False while the client is reconnecting: callers get a fast 503, not a hang. */
  connected = true;
  private readonly waiters = new Map<string, Waiting>();
  /** Jobs sent in this turn of the event loop, published together at its end (#send). */
  #outgoing: { subject: string; data: Uint8Array; reply: string; headers: MsgHdrs | undefined }[] = [];
  private doneSubscribed: Promise<void> | undefined;
  /** This process's part of the refusals' reply subjects (send). */
  private readonly instance = nuid.next();

  /** relayctl.v1.agent.<server>.takeover and .cancel, each one subscription (server-fanout.ts). */
  private readonly takeovers: ServerFanout<string>;
  private readonly cancels: ServerFanout<string>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
  ) {
    const token = subjects.takeover("*").split(".").indexOf("*");
    this.takeovers = new ServerFanout(nc, subjects.takeover("*"), token, (d) => codec.takeover.decode(d));
    this.cancels = new ServerFanout(nc, subjects.cancel("*"), token, (d) => codec.cancel.decode(d));
  }

  private ensureConnected(): void {
    if (!this.connected || this.nc.isClosed()) throw new BusUnavailableError();
  }

  async dispatch(serverId: string, job: Job): Promise<DispatchOutcome> {
    this.ensureConnected();
    try {
      const subject = subjects.job(serverId);
      const reply = await tracedJobRequest(subject, job.operationId, (headers) =>
        this.nc.request(subject, codec.job.encode(job), { timeout: DISPATCH_ACK_TIMEOUT_MS, headers }),
      );
      return codec.reply.decode(reply.data) ? "on_stream" : "not_connected";
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === NatsErrorCode.NoResponders) return "not_connected";
      // The request went out and no answer came: the gateway may well have put the
      // job on the stream and its reply been lost (the api's NATS node died in
      // between; the client reconnects, the reply does not follow). "Not connected"
      // would record as not run a job the agent may be running.
      if (code === NatsErrorCode.Timeout) return "unknown";
      throw new BusUnavailableError(err);
    }
  }

  async dispatchToAll(serverId: string, job: Job, hint?: JobHint): Promise<DispatchOutcome> {
    this.ensureConnected();
    let refused = false;
    try {
      const answers = await this.nc.requestMany(subjects.job(serverId), codec.job.encode(job), {
        strategy: RequestStrategy.JitterTimer,
        jitter: MORE_ANSWERS_MS,
        maxWait: DISPATCH_ACK_TIMEOUT_MS,
        headers: withHint(undefined, hint),
      });
      for await (const answer of answers) {
        if (codec.reply.decode(answer.data)) return "on_stream";
        refused = true;
      }
    } catch (err) {
      if ((err as { code?: string }).code === NatsErrorCode.NoResponders) return "not_connected";
      throw new BusUnavailableError(err);
    }
    return refused ? "not_connected" : "unknown";
  }

  async ping(timeoutMs: number): Promise<void> {
    this.ensureConnected();
    try {
      await withTimeout(this.nc.flush(), timeoutMs);
    } catch (err) {
      throw new BusUnavailableError(err);
    }
  }

  async awaitDone(operationId: string): Promise<DoneWaiter> {
    this.ensureConnected();
    await this.subscribeDone();
    const waiting: Waiting = { done: () => {}, refused: () => {} };
    const done = new Promise<OperationDone>((r) => {
      waiting.done = r;
    });
    const refused = new Promise<void>((r) => {
      waiting.refused = r;
    });
    this.waiters.set(operationId, waiting);
    return { done, refused, cancel: () => this.waiters.delete(operationId) };
  }

  send(serverId: string, job: Job, hint?: JobHint): void {
    this.#send(subjects.job(serverId), job, (headers) => withHint(headers, hint));
  }

  sendStart(serverId: string, job: Job, hint: JobHint, start: JobStart): void {
    this.#send(subjects.jobStart(serverId), job, (headers) => withStart(withHint(headers, hint), start));
  }

  #send(subject: string, job: Job, headersOf: (h: MsgHdrs | undefined) => MsgHdrs | undefined): void {
    this.ensureConnected();
    const reply = subjects.refusals(this.instance, job.operationId);
    const data = codec.job.encode(job);
    // The PRODUCER span ends once the job is out: what follows is the completion's.
    void tracedJobRequest(subject, job.operationId, async (headers: MsgHdrs | undefined) => {
      const h = headersOf(headers);
      // Alone (no other job of this process waits for its completion): out at once. Otherwise
      // with the others of this turn of the event loop (setImmediate runs once the turn's I/O
      // callbacks have run): the client writes what is published in one task as one socket
      // write, and requests parsed in separate I/O callbacks each made a write of their own
      // (twice the api's writes and four times NATS's reads per exec under load, measured when
      // the exec's admission round trip, which had lined them up, went).
      if (this.waiters.size <= 1 && this.#outgoing.length === 0) {
        this.publish(subject, data, { reply, headers: h });
        return;
      }
      if (this.#outgoing.push({ subject, data, reply, headers: h }) === 1)
        setImmediate(() => this.#publishOutgoing());
    });
  }

  #publishOutgoing(): void {
    const out = this.#outgoing;
    this.#outgoing = [];
    for (const m of out) this.publish(m.subject, m.data, { reply: m.reply, headers: m.headers });
  }

  /**
   * One wildcard subscription per process for every completion, routed to the
   * waiting call in memory: a per-operation SUB would cost a flush (a NATS round
   * trip) on every synchronous call. Completions nobody here waits for are dropped.
   * Beside it, this process's refusals (send): a gateway's `on_stream` false, or
   * NATS's no-responders status (an empty message) when no gateway holds the agent.
   */
  private subscribeDone(): Promise<void> {
    this.doneSubscribed ??= (async () => {
      this.nc.subscribe(subjects.done("*"), {
        callback: (err, msg) => {
          if (err) return;
          const event = codec.done.decode(msg.data);
          this.waiters.get(event.operationId)?.done(event);
        },
      });
      const refusals = subjects.refusals(this.instance, "");
      this.nc.subscribe(`${refusals}*`, {
        callback: (err, msg) => {
          if (err) return;
          let onStream: boolean;
          try {
            onStream = codec.reply.decode(msg.data);
          } catch {
            return;
          }
          // A gateway that answers every job (one older than send) says on_stream too: not a refusal.
          if (!onStream) this.waiters.get(msg.subject.slice(refusals.length))?.refused();
        },
      });
      // The SUB must be on the server before the first job can finish.
      await withTimeout(this.nc.flush(), DISPATCH_ACK_TIMEOUT_MS);
    })().catch((err) => {
      this.doneSubscribed = undefined;
      throw new BusUnavailableError(err);
    });
    return this.doneSubscribed;
  }

  /**
   * The server's job subjects and its presence probes on one subscription,
   * relayctl.v1.agent.<server>.> (a subscription in nats.js is ~1.5 KB of heap with its
   * callback: 15 MiB for the second one per agent at 10,000). Both keep their per-server
   * meaning: NATS answers "no responders" when no gateway holds the agent. The family's other
   * subjects (takeover, cancel) arrive here too and are left to their own wildcard
   * subscriptions (server-fanout.ts).
   */
  serveServer(serverId: string, handler: JobHandler): () => void {
    const jobSubject = subjects.job(serverId);
    const startSubject = subjects.jobStart(serverId);
    const presenceSubject = subjects.presence(serverId);
    // `>`: the family's subjects and the jobs with a start, one token deeper (subjects.jobStart).
    const family = `${jobSubject.slice(0, jobSubject.lastIndexOf("."))}.>`;
    const sub = this.nc.subscribe(family, {
      callback: (err, msg) => {
        if (err) return;
        // Presence probes of the dashboard: answered only while this process serves the server.
        if (msg.subject === presenceSubject) {
          msg.respond(new Uint8Array(0));
          return;
        }
        const carriesStart = msg.subject === startSubject;
        if (msg.subject !== jobSubject && !carriesStart) return;
        let job: Job;
        try {
          job = codec.job.decode(msg.data);
        } catch (e) {
          this.log.error({ err: e, server_id: serverId }, "undecodable job on the bus");
          msg.respond(codec.reply.encode(false));
          return;
        }
        // A start that does not describe this job on this server is refused: nothing committed, nothing run.
        const start = carriesStart ? startOf(msg.headers, serverId, job.operationId) : undefined;
        if (carriesStart && !start) {
          this.log.error(
            { server_id: serverId, operation_id: job.operationId },
            "job with an unreadable start",
          );
          msg.respond(codec.reply.encode(false));
          return;
        }
        tracedJobHandling(msg.subject, job, msg.headers, () => handler(job, hintOf(msg.headers), start)).then(
          (onStream) => {
            // A sender that waits for the completion wants to hear only of a refusal (send).
            if (onStream && msg.reply?.startsWith(REFUSALS_PREFIX)) return;
            msg.respond(codec.reply.encode(onStream));
          },
          (e) => {
            this.log.error({ err: e, server_id: serverId }, "job handler failed");
            msg.respond(codec.reply.encode(false));
          },
        );
      },
    });
    return () => sub.unsubscribe();
  }

  async connectedServers(serverIds: string[]): Promise<Set<string>> {
    this.ensureConnected();
    const held = await Promise.all(
      serverIds.map(async (id) => {
        try {
          await this.nc.request(subjects.presence(id), new Uint8Array(0), { timeout: PRESENCE_TIMEOUT_MS });
          return id;
        } catch (err) {
          const code = (err as { code?: string }).code;
          if (code === NatsErrorCode.NoResponders || code === NatsErrorCode.Timeout) return undefined;
          throw new BusUnavailableError(err);
        }
      }),
    );
    return new Set(held.filter((id): id is string => id !== undefined));
  }

  publishDone(event: OperationDone): void {
    this.publish(subjects.done(event.operationId), codec.done.encode(event));
  }

  publishTakeover(serverId: string, connectionId: string): void {
    this.publish(subjects.takeover(serverId), codec.takeover.encode(connectionId));
  }

  onTakeover(serverId: string, handler: (connectionId: string) => void): () => void {
    return this.takeovers.on(serverId, handler);
  }

  publishLive(output: LogsOutput): void {
    this.publish(subjects.live(output.operationId), codec.live.encode(output));
  }

  /**
   * One SUB per reader (a follow is long, unlike an operation's completion): the
   * flush puts it on the server before the job goes out, so no line is missed.
   */
  async subscribeLive(operationId: string, handler: (o: LogsOutput) => void): Promise<Unsubscribe> {
    this.ensureConnected();
    const sub = this.nc.subscribe(subjects.live(operationId), {
      callback: (err, msg) => {
        if (err) return;
        try {
          handler(codec.live.decode(msg.data));
        } catch (e) {
          this.log.warn({ err: e, operation_id: operationId }, "undecodable live output on the bus");
        }
      },
    });
    try {
      await withTimeout(this.nc.flush(), DISPATCH_ACK_TIMEOUT_MS);
    } catch (err) {
      sub.unsubscribe();
      throw new BusUnavailableError(err);
    }
    return () => sub.unsubscribe();
  }

  publishProgress(operationId: string): void {
    this.publish(subjects.progress(operationId), new Uint8Array(0));
  }

  /** One SUB per followed operation and api instance (live-log.ts shares it between streams). */
  async subscribeProgress(
    operationId: string,
    handler: (what: "progress" | "done") => void,
  ): Promise<Unsubscribe> {
    this.ensureConnected();
    const done = subjects.done(operationId);
    const sub = this.nc.subscribe(subjects.opEvents(operationId), {
      callback: (err, msg) => {
        if (!err) handler(msg.subject === done ? "done" : "progress");
      },
    });
    try {
      await withTimeout(this.nc.flush(), DISPATCH_ACK_TIMEOUT_MS);
    } catch (err) {
      sub.unsubscribe();
      throw new BusUnavailableError(err);
    }
    return () => sub.unsubscribe();
  }

  cancelJob(serverId: string, operationId: string): void {
    this.publish(subjects.cancel(serverId), codec.cancel.encode(operationId));
  }

  onCancel(serverId: string, handler: (operationId: string) => void): Unsubscribe {
    return this.cancels.on(serverId, handler);
  }

  private publish(subject: string, payload: Uint8Array, opts?: { reply: string; headers?: MsgHdrs }): void {
    try {
      this.nc.publish(subject, payload, opts);
    } catch (err) {
      // While disconnected the client buffers; only a closed connection throws.
      natsErrors.inc({ kind: "publish" });
      this.log.warn({ err, subject }, "nats publish failed");
    }
  }

  async close(): Promise<void> {
    await this.nc.drain().catch(() => this.nc.close());
  }
}

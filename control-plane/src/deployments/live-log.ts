// A deployment's log as server-sent events: every progress message recorded so
// far (`event: progress`), then new ones as the agent sends them, with `event:
// state` (the deployment's view) after them whenever its status changes (queued,
// running, then its final status), then `event: end` with the final view, and
// the stream closes. The end waits for the steps that go on after the result
// (retire drains the old container in the background) up to
// BACKGROUND_STEPS_MS, so a follower's last view of the steps has none running;
// the final `state` already says how the deployment ended (issue 31, defect 2). The database is
// the source (any api instance can serve any follower, whichever gateway holds
// the agent), read when the writer announces a write on the bus (the gateway
// after storing the agent's progress, the api after a queue line, and the
// operation's done event; bus/job-bus.ts publishProgress), not on a timer: an
// idle stream costs nothing (issue 30, finding 3). One bus subscription per
// followed deployment serves every stream of it on this api instance.
//
// Streams are bounded per credential and per tenant (RELAYCTL_LIVE_LOG_STREAMS_*,
// counted like the application-logs follows: applications/logs-limits.ts).
import type { FastifyReply } from "fastify";
import type { Knex } from "knex";
import { FollowLimits } from "../applications/logs-limits.js";
import type { JobBus, Unsubscribe } from "../bus/job-bus.js";
import { QUEUE_SEQ } from "./store.js";
import { deploymentState, progressSince, stepsRunning } from "./view.js";

/**
 * A look without an announcement now and then: a message lost on the bus (NATS
 * is at most once, and reconnects) delays a line by this much at worst.
 */
const RECHECK_MS = 15_000;
/** Without the bus (down when the stream opened), the database is read this often instead. */
const NO_BUS_POLL_MS = 1_000;
/** How long after the finish the end waits for steps still running (retire). */
const BACKGROUND_STEPS_MS = 60_000;
/** A comment line now and then keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

type Wake = "progress" | "done";

/** What the streams of one deployment share on this instance: one subscription, many listeners. */
interface Watch {
  listeners: Set<(what: Wake) => void>;
  subscribed: Promise<Unsubscribe | undefined>;
}

export class LiveLogs {
  readonly #watches = new Map<string, Watch>();
  readonly limits: FollowLimits;

  constructor(
    private readonly db: Knex,
    private readonly bus: JobBus,
    bounds: { followsPerKey: number; followsPerTenant: number },
  ) {
    this.limits = new FollowLimits(bounds, "deployment live logs");
  }

  /**
   * Listens to one operation's announcements, sharing the bus subscription;
   * resolves once it is in place (false when the bus is down: poll instead).
   */
  async #listen(
    operationId: string,
    listener: (what: Wake) => void,
    log: FastifyReply["log"],
  ): Promise<{ live: boolean; stop: () => void }> {
    let w = this.#watches.get(operationId);
    if (!w) {
      const listeners = new Set<(what: Wake) => void>();
      const subscribed = this.bus
        .subscribeProgress(operationId, (what) => {
          for (const l of listeners) l(what);
        })
        .catch((err: unknown) => {
          log.warn({ err, operation_id: operationId }, "live log without the bus: reading every second");
          return undefined;
        });
      w = { listeners, subscribed };
      this.#watches.set(operationId, w);
    }
    const watch = w;
    watch.listeners.add(listener);
    const live = (await watch.subscribed) !== undefined;
    const stop = () => {
      watch.listeners.delete(listener);
      if (watch.listeners.size > 0 || this.#watches.get(operationId) !== watch) return;
      this.#watches.delete(operationId);
      void watch.subscribed.then((unsubscribe) => unsubscribe?.());
    };
    return { live, stop };
  }

  /** Streams one deployment's log to `reply` (404 as JSON before the stream starts). */
  async stream(
    reply: FastifyReply,
    /** appUrl: the application's URL, the `url` of the end view once it serves. */
    scope: { tenantId: string; applicationId: string; deploymentId: string; appUrl?: string | null },
    /** The credential holding the stream (its key id) and its tenant: the bounds' subjects. */
    who: { keyId: string; tenantId: string },
    stop: AbortSignal,
  ): Promise<void> {
    const { db } = this;
    const readState = () =>
      deploymentState(db, scope.tenantId, scope.applicationId, scope.deploymentId, scope.appUrl);
    // 404, then 429, as JSON before the stream starts.
    const first = await readState();
    let release: () => void;
    try {
      release = this.limits.acquire(who.keyId, who.tenantId);
    } catch (err) {
      reply.header("retry-after", "5");
      throw err;
    }
    try {
      await this.#follow(reply, first.id, readState, stop);
    } finally {
      release();
    }
  }

  async #follow(
    reply: FastifyReply,
    deploymentId: string,
    readState: () => ReturnType<typeof deploymentState>,
    stop: AbortSignal,
  ): Promise<void> {
    const { db } = this;
    const row = await db("deployments")
      .where({ id: deploymentId })
      .first<{ operation_id: string }>("operation_id");

    // Woken by an announcement, the stream's end, or a timer; wakes while reading coalesce.
    let pending: Wake | "check" | undefined;
    let wakeUp: (() => void) | undefined;
    const wake = (what: Wake | "check") => {
      pending = pending === "done" || what === "done" ? "done" : pending === "check" ? "check" : what;
      wakeUp?.();
    };
    // Subscribed before the first read: a line stored in between is not missed.
    const listening = await this.#listen(row!.operation_id, wake, reply.log);
    const res = reply.raw;
    let gone = false;
    const end = () => {
      gone = true;
      wakeUp?.();
    };
    try {
      // Read after subscribing: a finish just before is seen here, not at the next recheck.
      let state = await readState();
      reply.hijack();
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache, no-transform",
        connection: "keep-alive",
        "x-accel-buffering": "no",
      });
      // The headers now, not with the first line: a queued deployment may be quiet for long.
      res.flushHeaders();
      res.on("close", end);
      stop.addEventListener("abort", end, { once: true });
      const recheckMs = listening.live ? RECHECK_MS : NO_BUS_POLL_MS;
      // The control plane's queue lines come first, with negative seqs (store.ts QUEUE_SEQ).
      let seq = QUEUE_SEQ.waiting - 1;
      let quietSince = Date.now();
      /** The status the last `state` event said. */
      let told: string | undefined;
      let finishedAt: number | undefined;
      for (;;) {
        const finished = state.finished;
        // Everything recorded up to the moment it was seen finished, then its state.
        for (;;) {
          const batch = await progressSince(db, state.id, seq);
          for (const p of batch) res.write(frame("progress", p));
          if (batch.length > 0) {
            seq = batch[batch.length - 1]!.seq;
            quietSince = Date.now();
          }
          if (batch.length < 500) break;
        }
        if (state.view.status !== told) {
          res.write(frame("state", state.view));
          told = state.view.status;
        }
        if (finished) {
          finishedAt ??= Date.now();
          if (Date.now() - finishedAt >= BACKGROUND_STEPS_MS || !(await stepsRunning(db, state.id))) {
            res.write(frame("end", state.view));
            break;
          }
        }
        if (gone || stop.aborted) break;
        if (Date.now() - quietSince >= KEEPALIVE_MS) {
          res.write(": keep-alive\n\n");
          quietSince = Date.now();
        }
        if (pending === undefined) {
          const waitMs =
            finishedAt === undefined
              ? recheckMs
              : Math.min(recheckMs, Math.max(0, finishedAt + BACKGROUND_STEPS_MS - Date.now()));
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => wake("check"), waitMs);
            wakeUp = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wakeUp = undefined;
        }
        const what = pending;
        pending = undefined;
        if (gone || stop.aborted) break;
        // Progress leaves the state as it was, but for the first of the agent's (dispatched:
        // no longer queued); a finish or a plain look reads it.
        if (what !== "progress" || state.view.status === "queued") state = await readState();
      }
    } finally {
      stop.removeEventListener("abort", end);
      listening.stop();
      res.end();
    }
  }
}

// The one owner of an operation's life, whatever its type (exec, restart,
// registry login/logout, reboot, route sync, and deploy next):
//
//   start     the operation row and its audit event, in one transaction, before
//             anything runs (fail closed: no row, nothing runs);
//   dispatch  the job to the gateway holding the server's agent, subscribed to
//             the completion first so a fast result is never missed;
//   wait      for the result within a budget, answered as a value: finished,
//             still running, or not run (not connected / bus unavailable);
//   complete  store the final state, then announce it (agent reports, the
//             sweeper, reboot completion and provider refusals all end here).
//
// Nothing here knows HTTP: callers map an Outcome to their answer.
import { JobStatus } from "@relayctl/proto";
import type { Knex } from "knex";
import type { Logger } from "pino";
import {
  BusUnavailableError,
  type DispatchOutcome,
  type DoneWaiter,
  type Job,
  type JobBus,
  type JobKind,
  type OperationDone,
} from "../bus/job-bus.js";
import type { JobHint } from "../bus/job-hint.js";
import type { JobStart } from "../bus/job-start.js";
import { CountRefusedError } from "../auth/deferred-count.js";
import type {
  Dispatched,
  DispatchOptions,
  NotRunCause,
  Outcome,
  StartSpec,
  StartedOperation,
} from "./outcome.js";
import { chainHeadGuess, noteChainHead } from "../audit/group-commit.js";
import { currentRequestId } from "../tracing/request-id.js";
import {
  type CompletionHook,
  type KnownOperation,
  type Settlement,
  type Settler,
  finishOperation,
} from "./finish.js";
import {
  type FinalResult,
  type FinalStatus,
  buildOperation,
  commitStart,
  createOperation,
  readResult,
} from "./store.js";
import {
  completionDuration,
  dispatchDuration,
  keyAdmissions,
  natsErrors,
  operationDuration,
  operationsFinished,
  operationsStarted,
} from "../observability/metrics.js";

/** Results this small ride on the done event, saving the waiting api a read. */
const INLINE_RESULT_BYTES = 256 * 1024;

/** How long a refusal is still listened for after the caller stopped waiting (answered 202). */
const REFUSAL_GRACE_MS = 10_000;

const REFUSED = Symbol("refused");

const STATUS_OF: Record<FinalStatus, JobStatus> = {
  completed: JobStatus.JOB_STATUS_COMPLETED,
  failed: JobStatus.JOB_STATUS_FAILED,
  timeout: JobStatus.JOB_STATUS_TIMEOUT,
};

const FINAL_OF: Partial<Record<JobStatus, FinalStatus>> = {
  [JobStatus.JOB_STATUS_COMPLETED]: "completed",
  [JobStatus.JOB_STATUS_FAILED]: "failed",
  [JobStatus.JOB_STATUS_TIMEOUT]: "timeout",
};

const notConnected = (op: StartedOperation) => `server '${op.server.name}' is not connected`;

export class OperationService {
  constructor(
    readonly db: Knex,
    readonly bus: JobBus,
    readonly log: Logger,
    /** How long an agent may go without a heartbeat before its operations are lost. */
    readonly leaseMs: number,
  ) {}

  private readonly completionHooks = new Map<string, CompletionHook>();
  private readonly settlers = new Map<string, Settler>();

  /**
   * What an operation kind writes with its final state, in the same transaction
   * (keyed by the result detail's `$case`). Registered once at boot by the module
   * that owns the kind (deployments/service.ts), so this layer knows none.
   */
  onCompletion(detailCase: string, hook: CompletionHook): void {
    this.completionHooks.set(detailCase, hook);
  }

  /**
   * What a job's caller asked, with the job (JobHint.settle), to be stored with an
   * operation's final state, in the same commit: keyed by operation type, registered
   * once at boot by the module that owns it (external-deploy/settle.ts), so this
   * layer knows none. Its done event then says `settled`, and the caller stores
   * nothing more. A plan it cannot read (undefined) leaves the operation unsettled.
   */
  onSettle(operationType: string, settler: Settler): void {
    this.settlers.set(operationType, settler);
  }

  /**
   * Records the operation and its audit event atomically (fail closed): throws
   * RC_ERR_STORE_UNAVAILABLE (503) when the database cannot be reached, and the
   * cause itself (a 500) for anything else.
   */
  async start(spec: StartSpec): Promise<StartedOperation> {
    // This start carries no count: the request is admitted the full way first (refused: thrown).
    await spec.count?.admit();
    const { id, startedAt } = await createOperation(this.db, this.#newOperation(spec));
    operationsStarted.inc({ type: spec.operationType });
    const head = chainHeadGuess(this.db, spec.tenantId);
    const hint = head && {
      ...head,
      operationType: spec.operationType,
      startedAt,
      runId: spec.runId,
    };
    return { id, server: spec.server, startedAt, tenantId: spec.tenantId, hint };
  }

  /**
   * start, then run, for a caller that waits (waitMs > 0): on a bus whose gateways commit starts
   * (JobBus.sendStart), the start goes with the job and the gateway holding the agent commits it
   * before the job goes on the stream. The tenant's chain then has one writer per operation, the
   * gateway, whose starts and completions share its batches. Anything but the completion (a
   * refusal, the end of the wait, a bus that cannot be reached) has this process commit the same
   * start itself first, unless it is there already: nothing runs, and nothing is answered
   * "running" or "not run", without its start committed. Only a start without rows of its own
   * (`together`) and with a lease goes with its job. A start that carries its request's count
   * (auth/deferred-count.ts) commits it with the start, whichever side commits it.
   */
  async startAndRun(
    spec: StartSpec,
    kind: JobKind,
    waitMs: number,
    opts: DispatchOptions = {},
  ): Promise<{ op: StartedOperation; outcome: Outcome }> {
    if (!this.bus.sendStart || waitMs <= 0 || spec.together || spec.leased === false) {
      const op = await this.start(spec);
      return { op, outcome: await this.run(op, kind, waitMs, opts) };
    }
    const start: JobStart = { ...buildOperation(this.#newOperation(spec)), count: spec.count?.count };
    const { id, started_at: startedAt } = start.row;
    const op: StartedOperation = {
      id,
      server: spec.server,
      startedAt,
      tenantId: spec.tenantId,
      // No chain head (seq 0): the gateway's own commit of the start leaves it the newest.
      hint: { seq: 0, head: null, operationType: spec.operationType, startedAt, runId: spec.runId },
    };
    let committed: Promise<void> | undefined;
    // With its count when it carries one: a guard that refuses it has the request admitted the
    // full way (its refusal thrown), then the start committed without (the admission counted it).
    const commitOwn = async () => {
      try {
        await commitStart(this.db, start);
      } catch (err) {
        if (!(err instanceof CountRefusedError) || !spec.count) throw err;
        keyAdmissions.inc({ way: "refused_on_start" });
        await spec.count.admit();
        await commitStart(this.db, { ...start, count: undefined });
      }
    };
    const ensureStarted = () => {
      committed ??= commitOwn();
      return committed;
    };
    const job: Job = { operationId: id, kind, traceContext: {}, requestId: currentRequestId() ?? "" };
    const timer = dispatchDuration.startTimer();
    let waiter: DoneWaiter | undefined;
    let dispatched: Dispatched;
    try {
      waiter = await this.bus.awaitDone(id);
      this.bus.sendStart(spec.server.id, job, op.hint!, start);
      timer({ outcome: "sent" });
      dispatched = { state: "sent", op, job, waiter, opts, ensureStarted };
    } catch (err) {
      waiter?.cancel();
      if (!(err instanceof BusUnavailableError)) throw err;
      await ensureStarted();
      dispatched = await this.dispatch(op, kind, { ...opts, awaitResult: true });
    }
    const outcome = await this.wait(dispatched, waitMs);
    // Whatever the outcome, its start is committed now (by the gateway, or here): counted once.
    operationsStarted.inc({ type: spec.operationType });
    return { op, outcome };
  }

  #newOperation(spec: StartSpec) {
    return {
      tenantId: spec.tenantId,
      serverId: spec.server.id,
      operationType: spec.operationType,
      keyId: spec.keyId,
      runId: spec.runId,
      leaseMs: spec.leased === false ? null : this.leaseMs,
      deadlineAt: Date.now() + spec.deadlineSeconds * 1000,
      preBootId: spec.preBootId,
      together: spec.together,
      audit: { ...spec.audit, server_id: spec.server.id, server_name: spec.server.name },
    };
  }

  /**
   * Hands the job to the agent's gateway. When it cannot be (no gateway holds
   * the agent, or the bus is down), the operation is finished here with the
   * reason, and the answer says so.
   */
  async dispatch(op: StartedOperation, kind: JobKind, opts: DispatchOptions = {}): Promise<Dispatched> {
    const notRun = (cause: NotRunCause, reason: string) => this.#notRunOf(op, cause, reason, opts);
    let waiter: DoneWaiter | undefined;
    const timer = dispatchDuration.startTimer();
    try {
      // The trace context is the bus's to add (NATS headers), then the gateway's.
      const job: Job = { operationId: op.id, kind, traceContext: {}, requestId: currentRequestId() ?? "" };
      if (opts.awaitResult !== false) {
        // The caller waits for the completion anyway: only a refusal is answered (wait()
        // hears it), which spares every job that reaches its agent a reply.
        waiter = await this.bus.awaitDone(op.id);
        this.bus.send(op.server.id, job, op.hint);
        timer({ outcome: "sent" });
        return { state: "sent", op, job, waiter, opts };
      }
      const outcome = await this.bus.dispatchToAll(op.server.id, job, op.hint);
      timer({ outcome });
      if (outcome === "unknown")
        this.log.warn({ operation_id: op.id }, "no answer to the dispatch; the operation's lease decides");
      if (outcome !== "not_connected") return { state: "on_stream", op, waiter: undefined };
      return notRun("not_connected", notConnected(op));
    } catch (err) {
      waiter?.cancel();
      if (!(err instanceof BusUnavailableError)) throw err;
      timer({ outcome: "bus_unavailable" });
      natsErrors.inc({ kind: "unavailable" });
      this.log.warn({ err, operation_id: op.id }, "job bus unavailable; operation not run");
      return notRun("bus_unavailable", "job bus unavailable");
    }
  }

  /**
   * Waits up to `waitMs` for a dispatched job's result (or its refusal: not
   * connected); releases the subscription. A refusal is asked again, with an
   * answer either way, before it counts: while an agent moves to another
   * gateway, the one it left may still refuse the job the new one put on the
   * stream (the agent's journal makes the second delivery a duplicate: acked,
   * never run twice). A refusal that comes after the caller stopped waiting
   * still ends the operation as not run.
   */
  async wait(d: Dispatched, waitMs: number): Promise<Outcome> {
    if (d.state === "not_run") return d;
    if (d.state === "on_stream") return { state: "running" };
    const { waiter, op, job, opts, ensureStarted } = d;
    // A job sent with its start: committed here before a refusal is acted on or "running" answered.
    const started = async () => {
      try {
        await ensureStarted?.();
      } catch (err) {
        waiter.cancel();
        throw err;
      }
    };
    // Undefined once a refusal has been asked about. Not a promise that never settles: every race
    // adds a reaction to each promise it is given, and a pending one shared by the process would
    // keep each race and its outcome (the result, stdout included) for the life of the process.
    let refused: Promise<typeof REFUSED> | undefined = waiter.refused.then((): typeof REFUSED => REFUSED);
    const deadline = Date.now() + waitMs;
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), Math.max(0, deadline - Date.now()));
      });
      let event: OperationDone | typeof REFUSED | undefined;
      try {
        event = await Promise.race(refused ? [waiter.done, refused, late] : [waiter.done, late]);
      } finally {
        clearTimeout(timer);
      }
      if (event === undefined) {
        // "running" names an operation that is recorded: its start, unless its gateway's is there.
        await started();
        // Answered "running": a refusal may still be on its way (unless one was asked about already).
        const grace = setTimeout(() => waiter.cancel(), REFUSAL_GRACE_MS);
        grace.unref();
        void refused?.then(async () => {
          clearTimeout(grace);
          waiter.cancel();
          if ((await this.#askAgain(op, job)) === "not_connected")
            await this.#notRunOf(op, "not_connected", notConnected(op), opts);
        });
        return { state: "running" };
      }
      if (event !== REFUSED) {
        waiter.cancel();
        return this.#finished(event, op.tenantId);
      }
      // Refused with its start: nothing of it ran; asked again (as plain jobs) once it is recorded.
      await started();
      if ((await this.#askAgain(op, job)) === "not_connected") {
        waiter.cancel();
        return this.#notRunOf(op, "not_connected", notConnected(op), opts);
      }
      refused = undefined; // on a stream after all: its completion, or the budget, ends the wait
    }
  }

  /**
   * The job again as a request answered either way, hearing every gateway that
   * answers (on a stream if any put it on one); a bus that cannot be reached
   * leaves it to the lease.
   */
  async #askAgain(op: StartedOperation, job: Job): Promise<DispatchOutcome | "bus_unavailable"> {
    const timer = dispatchDuration.startTimer();
    try {
      const outcome = await this.bus.dispatchToAll(op.server.id, job);
      timer({ outcome: `refused_then_${outcome}` });
      return outcome;
    } catch (err) {
      if (!(err instanceof BusUnavailableError)) throw err;
      this.log.warn({ err, operation_id: op.id }, "job refused, and the bus is unavailable to ask again");
      return "bus_unavailable";
    }
  }

  /** dispatch, then wait: the flow of every synchronous-style call. */
  async run(
    op: StartedOperation,
    kind: JobKind,
    waitMs: number,
    opts: DispatchOptions = {},
  ): Promise<Outcome> {
    return this.wait(await this.dispatch(op, kind, { ...opts, awaitResult: waitMs > 0 }), waitMs);
  }

  /**
   * Stores the final state, then announces it. Returns false when the operation
   * was no longer running (finished by someone else first): nothing is announced.
   * `serverId` limits it to that server's operations (an agent's own report);
   * `tenantId`, when the caller knows it, saves a read.
   */
  async complete(
    id: string,
    result: FinalResult,
    serverId?: string,
    tenantId?: string,
    /** What the api told with the job (its gateway's): the chain head as a guess, the row's facts. */
    hint?: JobHint,
  ): Promise<boolean> {
    const timer = completionDuration.startTimer();
    let known: KnownOperation | undefined;
    let settlement: Settlement | undefined;
    if (hint && tenantId) {
      // seq 0: a hint without a head (the job carried its start, which this process committed).
      if (hint.seq > 0) noteChainHead(this.db, tenantId, hint);
      known = hint;
      settlement = this.#settlementOf(id, hint, result, tenantId, serverId);
    }
    const finished = await finishOperation(
      this.db,
      id,
      result,
      serverId,
      tenantId,
      this.completionHooks,
      known,
      settlement,
    );
    if (!finished) return false;
    const head = tenantId ? chainHeadGuess(this.db, tenantId) : undefined;
    const event: OperationDone = {
      operationId: id,
      status: STATUS_OF[result.status],
      result: undefined,
      settled: finished.settled,
      chainSeq: head?.seq ?? 0,
      chainHead: head?.head ?? "",
    };
    if (result.stdout.length + result.stderr.length <= INLINE_RESULT_BYTES) {
      event.result = {
        operationId: id,
        status: STATUS_OF[result.status],
        exitCode: result.exit_code,
        stdout: result.stdout,
        stderr: result.stderr,
        durationMs: result.duration_ms,
        error: result.error ?? "",
        detail: result.detail,
      };
    }
    this.bus.publishDone(event);
    timer();
    const labels = { type: finished.operationType, status: result.status };
    operationsFinished.inc(labels);
    operationDuration.observe(labels, Math.max(0, Date.now() - finished.startedAt) / 1000);
    return true;
  }

  /** Ends an operation that never produced a result of its own (exit code -1). */
  async fail(id: string, status: FinalStatus, reason: string, durationMs = 0, serverId?: string) {
    return this.complete(
      id,
      { status, exit_code: -1, stdout: "", stderr: reason, duration_ms: durationMs, error: reason },
      serverId,
    );
  }

  /** A job that could not be handed over: finished here, unless the caller will try again. */
  async #notRunOf(
    op: StartedOperation,
    cause: NotRunCause,
    reason: string,
    opts: DispatchOptions,
  ): Promise<Extract<Outcome, { state: "not_run" }>> {
    if (!opts.retryNotRun) return this.#notRun(op, cause, reason, opts);
    const result = { exit_code: -1, stdout: "", stderr: reason, duration_ms: 0 };
    return { state: "not_run", cause, reason, result };
  }

  async #notRun(op: StartedOperation, cause: NotRunCause, reason: string, opts: DispatchOptions) {
    const status = opts.notRunStatus ?? "failed";
    const result = { exit_code: -1, stdout: "", stderr: reason, duration_ms: 0 };
    // Best effort: the row stays `running` if the store is down too, and the
    // sweeper ends it at its deadline.
    await this.complete(op.id, { status, ...result, error: status === "failed" ? reason : null }).catch(
      (err) => this.log.warn({ err, operation_id: op.id }, "could not record an operation that did not run"),
    );
    return { state: "not_run" as const, cause, reason, result };
  }

  async #finished(event: OperationDone, tenantId: string | undefined): Promise<Outcome> {
    const status = FINAL_OF[event.status] ?? "failed";
    const settled = event.settled;
    // The head the completion left: this process's next audited write of the tenant may commit on it.
    if (tenantId && event.chainSeq > 0)
      noteChainHead(this.db, tenantId, { seq: event.chainSeq, head: event.chainHead || null });
    if (event.result) {
      const r = event.result;
      const result = { exit_code: r.exitCode, stdout: r.stdout, stderr: r.stderr, duration_ms: r.durationMs };
      return { state: "finished", status, result, detail: r.detail, settled };
    }
    const { detail, ...result } = await readResult(this.db, event.operationId);
    return { state: "finished", status, result, detail, settled };
  }

  /** The settlement the job's caller asked for, made from the result; undefined when none (or unreadable). */
  #settlementOf(
    id: string,
    hint: JobHint,
    result: FinalResult,
    tenantId: string,
    serverId: string | undefined,
  ): Settlement | undefined {
    if (hint.settle === undefined || !serverId) return undefined;
    const settler = this.settlers.get(hint.operationType);
    try {
      return settler?.({ operationId: id, tenantId, serverId, plan: hint.settle, result });
    } catch (err) {
      // The completion itself must not fail for it: the caller then stores the settlement itself.
      this.log.warn({ err, operation_id: id }, "settlement not made; the caller stores it");
      return undefined;
    }
  }
}

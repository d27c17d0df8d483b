// What the operation service is asked and what it answers (service.ts): the start
// a caller specifies, the operation started, a job handed over, and its outcome.
// Callers that only speak of operations (routes, deployments, external deploys)
// import these without the service.
import type { DeferredCount } from "../auth/deferred-count.js";
import type { DoneWaiter, Job } from "../bus/job-bus.js";
import type { JobHint } from "../bus/job-hint.js";
import type { FinalResult, FinalStatus, NewOperation, OperationResult } from "./store.js";
import type { OperationType } from "./types.js";

export interface ServerRef {
  id: string;
  name: string;
}

export interface StartSpec {
  tenantId: string;
  server: ServerRef;
  operationType: OperationType;
  keyId: string | null;
  runId: string | null;
  /** Hard deadline of the operation, from now. */
  deadlineSeconds: number;
  /** false: no lease (a reboot: the agent cannot heartbeat while the machine restarts). */
  leased?: boolean;
  /** The server's boot id when a reboot is asked for. */
  preBootId?: string | null;
  /** Type-specific audit fields (never secrets, never env values). */
  audit: Record<string, unknown>;
  /** Rows that belong to the operation, written in its transaction (store.ts). */
  together?: NewOperation["together"];
  /**
   * The caller's request count, to commit with the start (auth/deferred-count.ts): a start
   * that cannot carry it, or whose guard refuses it, runs the full admission first.
   */
  count?: DeferredCount;
}

export interface StartedOperation {
  id: string;
  server: ServerRef;
  startedAt: number;
  /** The operation's tenant: the chain head its done event tells is noted for it. */
  tenantId?: string;
  /** Told to the gateway with the job: its completion may commit in one round trip. */
  hint?: JobHint;
}

export type NotRunCause = "not_connected" | "bus_unavailable";

export type Outcome =
  | {
      state: "finished";
      status: FinalStatus;
      result: OperationResult;
      detail: FinalResult["detail"];
      /** The completion stored the job's settlement (JobHint.settle) with the final state. */
      settled: boolean;
    }
  | { state: "running" }
  | { state: "not_run"; cause: NotRunCause; reason: string; result: OperationResult };

export interface DispatchOptions {
  /**
   * The final state recorded when the job cannot be handed to the agent.
   * @default "failed" — a registry logout records "completed" with a non-zero
   * exit code instead (the contract: a failed logout is a warning, never 5xx).
   */
  notRunStatus?: FinalStatus;
  /** Subscribe to the completion (needed only when the caller will wait). @default true */
  awaitResult?: boolean;
  /**
   * Leave the operation running when the job cannot be handed over, for the
   * caller to try again (a deploy waits for its agent until its deadline).
   * @default false
   */
  retryNotRun?: boolean;
}

/**
 * A job handed to the bus; wait on it (or release it) exactly once. `sent`: the
 * caller waits for the completion, and a refusal (not connected) can still
 * arrive while it does (JobBus.send); `on_stream`: the gateway said it is.
 */
export type Dispatched =
  | { state: "on_stream"; op: StartedOperation; waiter: undefined }
  | {
      state: "sent";
      op: StartedOperation;
      job: Job;
      waiter: DoneWaiter;
      opts: DispatchOptions;
      /**
       * A job sent with its start for the gateway to commit (sendStart): commits it here unless
       * it is there already; before a refusal is acted on and before a wait ends "running".
       */
      ensureStarted?: () => Promise<void>;
    }
  | Extract<Outcome, { state: "not_run" }>;

// The job bus between the api role and the gateway role (a port; adapters:
// nats-bus.ts for production and tests, memory-bus.ts for `make dev`). What
// travels is protobuf (proto/bus/v1/bus.proto): a job is the bytes of the very
// relayctl.agent.v1.Job the gateway writes on the agent's stream.
//
// api side:     dispatch() a job to the gateway holding the server's agent; awaitDone()
//               subscribes to an operation's completion (call it BEFORE dispatch); a
//               caller that waits anyway send()s instead: only a refusal is answered.
// gateway side: serveServer() while it holds an agent's stream; publishDone() after
//               a result is stored; takeovers close older streams of a server.
// Stored progress announced (publishProgress) so a deployment's live log reads
// it when it is written, not on a timer (subscribeProgress, also woken by done).
// Live output relayed, never stored (a LogsJob's lines): the gateway publishLive()s
// each LogsOutput of such a job, the api that started it listens with
// subscribeLive() (before dispatch) and stops it with cancelJob().
import type { Job, LogsOutput, OperationDone } from "@relayctl/proto";
import { RcError } from "../errors.js";
import type { JobHint } from "./job-hint.js";
import type { JobStart } from "./job-start.js";

export type { Job, LogsOutput, OperationDone } from "@relayctl/proto";

/** What a job carries besides its operation id (exec, restart, route sync...). */
export type JobKind = NonNullable<Job["kind"]>;

/** The bus cannot be reached (NATS down or reconnecting): nothing was handed over. */
export class BusUnavailableError extends RcError {
  constructor(cause?: unknown) {
    super("RC_ERR_BUS_UNAVAILABLE", undefined, { cause });
  }
}

/**
 * `unknown`: the job went out but no answer came back (a NATS node died between
 * the request and its reply, or a gateway stalled). It may be on the agent's
 * stream, so it must not be recorded as not run: the operation's lease decides.
 */
export type DispatchOutcome = "on_stream" | "not_connected" | "unknown";

export interface DoneWaiter {
  done: Promise<OperationDone>;
  /** Resolves when a job send() for this operation was refused (no gateway holds the agent); else never. */
  refused: Promise<void>;
  cancel(): void;
}

export type Unsubscribe = () => void;

/**
 * Returns true when the job is on the agent's stream. `hint`: what the api told with it (bus/job-hint.ts).
 * `start`: the operation's start, to be committed before the job goes on the stream (bus/job-start.ts).
 */
export type JobHandler = (job: Job, hint?: JobHint, start?: JobStart) => Promise<boolean>;

export interface JobBus {
  /**
   * Hands the job to the gateway holding the server's agent. `not_connected`:
   * no gateway holds it (or the one that did lost it); `unknown`: no answer. Throws
   * BusUnavailableError when the bus itself cannot be reached.
   */
  dispatch(serverId: string, job: Job): Promise<DispatchOutcome>;
  /**
   * Hands the job over for a caller already waiting on its completion (awaitDone
   * first): the gateway answers only a refusal, which resolves the waiter's
   * `refused`; a job put on the stream is answered by its completion alone. Two
   * messages per operation fewer than dispatch (bench/README.md, issue 17). No
   * answer at all (a gateway that stalled) looks like a job still running: the
   * operation's lease decides, as for dispatch's `unknown`. Throws
   * BusUnavailableError when the bus itself cannot be reached.
   */
  send(serverId: string, job: Job, hint?: JobHint): void;
  /**
   * As send, with the operation's start for the gateway to commit before the job goes on
   * the stream (bus/job-start.ts). Refused (the waiter's `refused`) when no gateway that
   * commits starts holds the agent, or the one that does could not commit it or put the
   * job on the stream; whether the start was committed then is not said: the caller
   * commits it itself (commitStart), then sends the job as send does. Absent on a bus
   * whose gateways do not commit starts.
   */
  sendStart?(serverId: string, job: Job, hint: JobHint, start: JobStart): void;
  /**
   * As dispatch, but every gateway that answers is heard (for a while after the
   * first answer): `on_stream` when any of them put the job on a stream. For a
   * refusal that may have come from a gateway an agent just left.
   */
  dispatchToAll(serverId: string, job: Job, hint?: JobHint): Promise<DispatchOutcome>;
  /** Resolves when the bus answers a round trip within `timeoutMs`; else BusUnavailableError (readiness). */
  ping(timeoutMs: number): Promise<void>;
  /** Subscribes to one operation's completion; call before dispatch. */
  awaitDone(operationId: string): Promise<DoneWaiter>;
  /** Gateway: take the server's jobs while this process holds its stream (and answer presence probes). */
  serveServer(serverId: string, handler: JobHandler): Unsubscribe;
  /**
   * Which of these servers a gateway holds a stream of now, on any instance
   * (the dashboard's live state). Throws BusUnavailableError when the bus is down.
   */
  connectedServers(serverIds: string[]): Promise<Set<string>>;
  /** After the final state is stored, never before. */
  publishDone(event: OperationDone): void;
  publishTakeover(serverId: string, connectionId: string): void;
  /** Gateway: a job's live output, in the order the agent sent it (subjects.live). */
  publishLive(output: LogsOutput): void;
  /**
   * Api: the live output of one job, in order; resolves once the subscription is
   * in place (call it before dispatch). Throws BusUnavailableError when the bus is down.
   */
  subscribeLive(operationId: string, handler: (output: LogsOutput) => void): Promise<Unsubscribe>;
  /**
   * Whoever stores a progress message of an operation (the gateway) or a line of
   * its log (the api's queue lines) announces it after the write; unanswered, no
   * payload: the database stays the record, this only says "read it now".
   */
  publishProgress(operationId: string): void;
  /**
   * Api: wakes `handler` when the operation's stored progress changed (`progress`)
   * or it finished (`done`, publishDone's event): a deployment's live log reads
   * the database then, not on a timer. Resolves once the subscription is in
   * place (subscribe, then read, so nothing is missed). Throws
   * BusUnavailableError when the bus is down.
   */
  subscribeProgress(operationId: string, handler: (what: "progress" | "done") => void): Promise<Unsubscribe>;
  /** Api: asks the gateway holding the server's agent to stop the job (a CancelJob); unanswered. */
  cancelJob(serverId: string, operationId: string): void;
  /** Gateway: the cancellations of the server's jobs, while it holds the agent's stream. */
  onCancel(serverId: string, handler: (operationId: string) => void): Unsubscribe;
  onTakeover(serverId: string, handler: (connectionId: string) => void): Unsubscribe;
  close(): Promise<void>;
}

/** Reply subjects under it want an answer only when the job is refused (send). */
export const REFUSALS_PREFIX = "relayctl.v1.refused.";

/** Subjects, versioned like the messages they carry (relayctl.bus.v1). */
export const subjects = {
  job: (serverId: string) => `relayctl.v1.agent.${serverId}.job`,
  /**
   * A job with its operation's start (bus/job-start.ts): one token deeper than the server's family
   * (relayctl.v1.agent.<server>.*), so a gateway that does not commit starts never receives one, and
   * with no other gateway holding the agent NATS answers no responders.
   */
  jobStart: (serverId: string) => `relayctl.v1.agent.${serverId}.job.start`,
  takeover: (serverId: string) => `relayctl.v1.agent.${serverId}.takeover`,
  done: (operationId: string) => `relayctl.v1.op.${operationId}.done`,
  /** "The operation's stored progress changed" (empty payload): a live log's wake-up. */
  progress: (operationId: string) => `relayctl.v1.op.${operationId}.progress`,
  /** done and progress of one operation, one subscription. */
  opEvents: (operationId: string) => `relayctl.v1.op.${operationId}.*`,
  /**
   * The reply subject of a send(): a job whose reply is under this prefix is answered only when
   * it is refused (`DispatchReply` with on_stream false, or NATS's no-responders status).
   */
  refusals: (instance: string, operationId: string) => `${REFUSALS_PREFIX}${instance}.${operationId}`,
  /** Answered (empty) by the gateway holding the server's stream; no responders = not connected. */
  presence: (serverId: string) => `relayctl.v1.agent.${serverId}.presence`,
  /** A job's live output (LogsOutput), relayed by the gateway, never stored. */
  live: (operationId: string) => `relayctl.v1.live.${operationId}`,
  /** CancelJob for the gateway holding the server's agent. */
  cancel: (serverId: string) => `relayctl.v1.agent.${serverId}.cancel`,
};

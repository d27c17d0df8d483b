// The job bus between the api role and the gateway role (a port; adapters:
// nats-bus.ts for production and tests, memory-bus.ts for `make dev`). What
// travels is protobuf (proto/bus/v1/bus.proto): a job is the bytes of the very
// relayctl.agent.v1.Job the gateway writes on the agent's stream.
//
// api side:     dispatch() a job to the gateway holding the server's agent; awaitDone()
//               subscribes to an operation's completion (call it BEFORE dispatch).
// gateway side: serveServer() while it holds an agent's stream; publishDone() after
//               a result is stored; takeovers close older streams of a server.
import type { Job, OperationDone } from "@relayctl/proto";
import { RcError } from "../errors.js";

export type { Job, OperationDone } from "@relayctl/proto";

/** What a job carries besides its operation id (exec, restart, route sync...). */
export type JobKind = NonNullable<Job["kind"]>;

/** The bus cannot be reached (NATS down or reconnecting): nothing was handed over. */
export class BusUnavailableError extends RcError {
  constructor(cause?: unknown) {
    super("RC_ERR_BUS_UNAVAILABLE", undefined, { cause });
  }
}

export type DispatchOutcome = "on_stream" | "not_connected";

export interface DoneWaiter {
  done: Promise<OperationDone>;
  cancel(): void;
}

export type Unsubscribe = () => void;

/** Returns true when the job is on the agent's stream. */
export type JobHandler = (job: Job) => Promise<boolean>;

export interface JobBus {
  /**
   * Hands the job to the gateway holding the server's agent. `not_connected`:
   * no gateway holds it (or the one that did lost it). Throws
   * BusUnavailableError when the bus itself cannot be reached.
   */
  dispatch(serverId: string, job: Job): Promise<DispatchOutcome>;
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
  onTakeover(serverId: string, handler: (connectionId: string) => void): Unsubscribe;
  close(): Promise<void>;
}

/** Subjects, versioned like the messages they carry (relayctl.bus.v1). */
export const subjects = {
  job: (serverId: string) => `relayctl.v1.agent.${serverId}.job`,
  takeover: (serverId: string) => `relayctl.v1.agent.${serverId}.takeover`,
  done: (operationId: string) => `relayctl.v1.op.${operationId}.done`,
  /** Answered (empty) by the gateway holding the server's stream; no responders = not connected. */
  presence: (serverId: string) => `relayctl.v1.agent.${serverId}.presence`,
};

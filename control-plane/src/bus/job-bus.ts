// The job bus between the api role and the gateway role (a port; adapters:
// nats-bus.ts for production and tests, memory-bus.ts for `make dev`).
//
// api side:     dispatch() a job to the gateway holding the server's agent; awaitDone()
//               subscribes to an operation's completion (call it BEFORE dispatch).
// gateway side: serveServer() while it holds an agent's stream; publishDone() after
//               a result is stored; takeovers close older streams of a server.

/**
 * A job as it travels on the bus: exactly one kind besides operation_id. `env`
 * values and registry passwords live only in memory, never stored or logged.
 */
export type JobEnvelope = { operation_id: string } & (
  | {
      exec: {
        command: string;
        working_directory: string;
        env: Record<string, string>;
        deadline_seconds: number;
      };
    }
  | { restart: { container_name: string; deadline_seconds: number } }
  | { registry_login: { registry: string; username: string; password: string; deadline_seconds: number } }
  | { registry_logout: { registry: string; deadline_seconds: number } }
  | { reboot: { reason: string } }
  | { route_sync: RouteSyncEnvelope }
);

/** A route-sync job (external deploy): routes to write, applications that still exist. */
export interface RouteSyncEnvelope {
  routes: {
    application_id: string;
    container_name: string;
    container_port: number;
    image_tag: string;
    fqdns: string[];
  }[];
  known_application_ids: string[];
  remove_application_ids: string[];
  deadline_seconds: number;
}

/** Published on relayctl.op.<id>.done once the final state is stored. */
export interface DoneEvent {
  operation_id: string;
  status: "completed" | "failed" | "timeout";
  /** Included when small enough; otherwise read the operation row. */
  result?: { exit_code: number; stdout: string; stderr: string; duration_ms: number };
}

export type DispatchOutcome = "acked" | "not_connected";

export interface DoneWaiter {
  done: Promise<DoneEvent>;
  cancel(): void;
}

export type Unsubscribe = () => void;

/** Returns true when the job is on the agent's stream. */
export type JobHandler = (job: JobEnvelope) => Promise<boolean>;

export interface JobBus {
  dispatch(serverId: string, job: JobEnvelope): Promise<DispatchOutcome>;
  awaitDone(operationId: string): Promise<DoneWaiter>;
  serveServer(serverId: string, handler: JobHandler): Unsubscribe;
  publishDone(event: DoneEvent): void;
  publishTakeover(serverId: string, connectionId: string): void;
  onTakeover(serverId: string, handler: (connectionId: string) => void): Unsubscribe;
  close(): Promise<void>;
}

export const subjects = {
  job: (serverId: string) => `relayctl.agent.${serverId}.job`,
  takeover: (serverId: string) => `relayctl.agent.${serverId}.takeover`,
  done: (operationId: string) => `relayctl.op.${operationId}.done`,
};

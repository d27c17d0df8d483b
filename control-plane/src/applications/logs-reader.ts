// One read of a container's log through the job bus: a LogsJob goes to the
// gateway holding the server's agent, and its lines come back on the bus as
// live output (bus/job-bus.ts subscribeLive), never stored, until a message
// ends them. The read is not an operation: no row, no audit, no lease. What
// could leave a reader waiting is bounded: an agent's stream that closes is
// ended by its gateway (LOGS_END_AGENT_DISCONNECTED), and a read that hears
// nothing for SILENCE_MS (a follow says it is alive every 15 s) is ended here.
import { randomUUID } from "node:crypto";
import { type LogsOutput, LogStream, LogsEnd } from "@relayctl/proto";
import type { JobBus } from "../bus/job-bus.js";
import { RcError } from "../errors.js";

/** Three of the agent's 15 s keep-alives. */
const SILENCE_MS = 45_000;

export interface LogLineOut {
  stream: "stdout" | "stderr";
  text: string;
}

export type EndReason =
  | "complete"
  | "container_gone"
  | "max_time"
  | "cancelled"
  | "failed"
  | "agent_disconnected";

const REASONS: Record<LogsEnd, EndReason> = {
  [LogsEnd.LOGS_END_UNSPECIFIED]: "failed",
  [LogsEnd.LOGS_END_COMPLETE]: "complete",
  [LogsEnd.LOGS_END_CONTAINER_GONE]: "container_gone",
  [LogsEnd.LOGS_END_MAX_TIME]: "max_time",
  [LogsEnd.LOGS_END_CANCELLED]: "cancelled",
  [LogsEnd.LOGS_END_FAILED]: "failed",
  [LogsEnd.LOGS_END_AGENT_DISCONNECTED]: "agent_disconnected",
  [LogsEnd.UNRECOGNIZED]: "failed",
};

export interface LogsTarget {
  serverId: string;
  containerName: string;
  tail: number;
  since?: string;
  follow: boolean;
  maxSeconds: number;
  /** Scrubbed on the agent; they travel in the job only. */
  secrets: string[];
  /** The API request's id, for the agent's log lines. */
  requestId: string;
}

export interface LogsEvents {
  lines(lines: LogLineOut[]): void;
  /** Called once, last. */
  end(reason: EndReason, detail: string): void;
}

export interface OpenRead {
  /** Stops the read (the agent kills its child); no event follows. Safe to call at any time. */
  stop(): void;
}

/** Starts the read: 409 when no gateway holds the server's agent, 503 when the bus is down. */
export async function startLogsRead(bus: JobBus, target: LogsTarget, events: LogsEvents): Promise<OpenRead> {
  const operationId = randomUUID();
  let over = false;
  let silence: NodeJS.Timeout | undefined;
  let unsubscribe = () => {};
  const finish = () => {
    over = true;
    clearTimeout(silence);
    unsubscribe();
  };
  const end = (reason: EndReason, detail: string) => {
    if (over) return;
    finish();
    events.end(reason, detail);
  };
  const listen = () => {
    clearTimeout(silence);
    silence = setTimeout(() => {
      // The agent may still be reading: tell it to stop, as for a reader that left.
      bus.cancelJob(target.serverId, operationId);
      end("agent_disconnected", `no word from the server's agent for ${SILENCE_MS / 1000} s`);
    }, SILENCE_MS);
  };
  unsubscribe = await bus.subscribeLive(operationId, (o: LogsOutput) => {
    if (over) return;
    listen();
    const { lines, end: ended, endDetail } = o;
    if (lines.length > 0)
      events.lines(
        lines.map((l) => ({
          stream: l.stream === LogStream.LOG_STREAM_STDERR ? "stderr" : "stdout",
          text: l.text,
        })),
      );
    if (ended !== LogsEnd.LOGS_END_UNSPECIFIED) end(REASONS[ended], endDetail);
  });
  listen();
  let outcome: Awaited<ReturnType<JobBus["dispatch"]>>;
  try {
    outcome = await bus.dispatch(target.serverId, {
      operationId,
      traceContext: {},
      requestId: target.requestId,
      kind: {
        $case: "logs",
        logs: {
          containerName: target.containerName,
          tail: target.tail,
          since: target.since ?? "",
          follow: target.follow,
          maxSeconds: target.maxSeconds,
          secrets: target.secrets,
        },
      },
    });
  } catch (err) {
    finish();
    throw err;
  }
  if (outcome === "not_connected") {
    finish();
    throw new RcError(
      "RC_ERR_SERVER_NOT_CONNECTED",
      "the application's server is not connected: no logs to read",
    );
  }
  // `unknown` (no answer from the gateway): the job may be on the stream; the silence bound decides.
  return {
    stop: () => {
      if (over) return;
      finish();
      bus.cancelJob(target.serverId, operationId);
    },
  };
}

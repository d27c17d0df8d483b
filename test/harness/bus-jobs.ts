// Jobs and events the bus contract tests send (bus-contract*.test.ts).
import type { Job } from "@relayctl/proto";
import type { JobBus } from "../../control-plane/src/bus/job-bus";
import { pollUntil } from "./wait";

/** A done event without a result, a settlement or a chain head. */
export const unsettled = { result: undefined, settled: false, chainSeq: 0, chainHead: "" };

export function execJob(operationId: string): Job {
  return {
    operationId,
    // The request id and trace context ride in the job itself, to the agent.
    traceContext: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
    requestId: "ci-run-42",
    kind: {
      $case: "exec",
      exec: {
        command: "printf '%s' \"$GREETING\"",
        workingDirectory: "/tmp",
        env: { GREETING: "héllo\nworld", EMPTY: "" },
        deadlineSeconds: 3600,
        streamOutput: false,
      },
    },
  };
}

/** Dispatches until a handler answers: a NATS subscription reaches the server a moment after serveServer. */
export function dispatchWhenServed(bus: JobBus, serverId: string, job: Job) {
  return pollUntil(async () => ((await bus.dispatch(serverId, job)) === "on_stream" ? true : undefined), {
    what: "the gateway's subscription",
    timeoutMs: 5000,
  });
}

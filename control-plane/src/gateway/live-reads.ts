// The log reads (LogsJob) on one agent's stream: their output (LogsOutput) is
// relayed to the bus as it comes (publishLive), never stored, to the api that
// started the read. When the stream closes, every read still going gets an
// ending message (LOGS_END_AGENT_DISCONNECTED): its reader learns at once, and
// the agent has killed the read's child on its side (agent/src/jobs/logs.ts).
import { type LogsOutput, LogsEnd } from "@relayctl/proto";
import type { Job, JobBus } from "../bus/job-bus.js";

export class LiveReads {
  /** Made at the stream's first log read: most streams never carry one, and a gateway holds 10,000. */
  #open: Set<string> | undefined;

  constructor(private readonly bus: JobBus) {}

  /** A job went on the stream. */
  sent(job: Job): void {
    if (job.kind?.$case !== "logs") return;
    this.#open ??= new Set();
    this.#open.add(job.operationId);
  }

  relay(output: LogsOutput): void {
    if (output.end !== LogsEnd.LOGS_END_UNSPECIFIED) this.#open?.delete(output.operationId);
    this.bus.publishLive(output);
  }

  /** The stream closed: the reads on it are over. */
  closed(): void {
    for (const operationId of this.#open ?? []) {
      this.bus.publishLive({
        operationId,
        seq: 0,
        lines: [],
        end: LogsEnd.LOGS_END_AGENT_DISCONNECTED,
        endDetail: "the server's agent disconnected",
      });
    }
    this.#open = undefined;
  }
}

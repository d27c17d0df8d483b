// The one wire encoding of the job bus, used by every adapter (the in-process
// bus too, so `make dev` exercises the same bytes as NATS).
import {
  CancelJob,
  DispatchReply,
  Job,
  JobResult,
  LogsOutput,
  OperationDone,
  Takeover,
} from "@relayctl/proto";

export const codec = {
  job: { encode: (j: Job) => Job.encode(j).finish(), decode: (b: Uint8Array) => Job.decode(b) },
  reply: {
    encode: (onStream: boolean) => DispatchReply.encode({ onStream }).finish(),
    decode: (b: Uint8Array) => DispatchReply.decode(b).onStream,
  },
  done: {
    encode: (e: OperationDone) => OperationDone.encode(e).finish(),
    decode: (b: Uint8Array) => OperationDone.decode(b),
  },
  live: {
    encode: (o: LogsOutput) => LogsOutput.encode(o).finish(),
    decode: (b: Uint8Array) => LogsOutput.decode(b),
  },
  cancel: {
    encode: (operationId: string) => CancelJob.encode({ operationId }).finish(),
    decode: (b: Uint8Array) => CancelJob.decode(b).operationId,
  },
  /** An agent's result handed from its gateway to the api that waits for it (sendResult). */
  result: {
    encode: (r: JobResult) => JobResult.encode(r).finish(),
    decode: (b: Uint8Array) => JobResult.decode(b),
  },
  /** The api's answer to a handed result: "stored" (its final state is in the database) or "declined". */
  stored: {
    encode: (s: StoreAnswer) => new TextEncoder().encode(s),
    decode: (b: Uint8Array): StoreAnswer =>
      new TextDecoder().decode(b) === "stored" ? "stored" : "declined",
  },
  takeover: {
    encode: (connectionId: string) => Takeover.encode({ connectionId }).finish(),
    decode: (b: Uint8Array) => Takeover.decode(b).connectionId,
  },
};

export type StoreAnswer = "stored" | "declined";

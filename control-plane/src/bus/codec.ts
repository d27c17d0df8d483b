// The one wire encoding of the job bus, used by every adapter (the in-process
// bus too, so `make dev` exercises the same bytes as NATS).
import { CancelJob, DispatchReply, Job, LogsOutput, OperationDone, Takeover } from "@relayctl/proto";

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
  takeover: {
    encode: (connectionId: string) => Takeover.encode({ connectionId }).finish(),
    decode: (b: Uint8Array) => Takeover.decode(b).connectionId,
  },
};

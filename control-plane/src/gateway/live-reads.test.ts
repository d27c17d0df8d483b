import { Job, LogsEnd, type LogsOutput } from "@relayctl/proto";
import test from "ava";
import { MemoryBus } from "../bus/memory-bus.js";
import { LiveReads } from "./live-reads.js";

const logsJob = (operationId: string) =>
  Job.fromPartial({ operationId, kind: { $case: "logs", logs: { containerName: "web", follow: true } } });

test("live reads - a closed stream ends each read still open on it, and only those", async (t) => {
  const bus = new MemoryBus();
  const seen: LogsOutput[] = [];
  for (const id of ["r1", "r2", "r3"]) await bus.subscribeLive(id, (o) => seen.push(o));
  const reads = new LiveReads(bus);
  reads.sent(logsJob("r1"));
  reads.sent(logsJob("r2"));
  // r2 ends on its own; r3 is not a log read on this stream.
  reads.relay({ operationId: "r2", seq: 1, lines: [], end: LogsEnd.LOGS_END_CONTAINER_GONE, endDetail: "" });
  reads.closed();
  reads.closed();
  const ends = seen.filter((o) => o.end === LogsEnd.LOGS_END_AGENT_DISCONNECTED).map((o) => o.operationId);
  t.deepEqual(ends, ["r1"]);
});

test("live reads - a stream that never carried a read ends nothing when it closes", async (t) => {
  const bus = new MemoryBus();
  const seen: LogsOutput[] = [];
  await bus.subscribeLive("r1", (o) => seen.push(o));
  new LiveReads(bus).closed();
  t.deepEqual(seen, []);
});

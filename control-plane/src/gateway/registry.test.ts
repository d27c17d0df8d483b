import { Job } from "@relayctl/proto";
import test from "ava";
import pino from "pino";
import { MemoryBus } from "../bus/memory-bus.js";
import { type StreamHandle, StreamRegistry } from "./registry.js";

const execJob = (operationId: string) =>
  Job.fromPartial({ operationId, kind: { $case: "exec", exec: { command: "true" } } });

/** A stream that records what it was sent; `open` false refuses jobs, as a closed stream does. */
function stream(serverId: string, connectionId: string, open = true) {
  const sent: string[] = [];
  const handle: StreamHandle = {
    connectionId,
    serverId,
    credentialHash: "h",
    sendJob: (job) => {
      if (open) sent.push(job.operationId);
      return open;
    },
    cancelJob: () => {},
    close: () => {},
  };
  return { handle, sent };
}

test("registry - a server's unacked jobs are forgotten with its last ack, and one not acked is sent again", async (t) => {
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, pino({ level: "silent" }));
  const first = stream("s1", "c1");
  registry.attach(first.handle);
  t.is(await bus.dispatchToAll("s1", execJob("o1")), "on_stream");
  t.is(await bus.dispatchToAll("s1", execJob("o2")), "on_stream");
  t.deepEqual(first.sent, ["o1", "o2"]);
  registry.acked("s1", "o1");
  t.is(registry.serversWithUnacked, 1);
  // o2 was never acked: the agent's next stream gets it again.
  const second = stream("s1", "c2");
  registry.attach(second.handle);
  t.deepEqual(second.sent, ["o2"]);
  registry.acked("s1", "o2");
  t.is(registry.serversWithUnacked, 0);
  // An ack for a server with nothing kept keeps nothing either.
  registry.acked("s2", "o9");
  t.is(registry.serversWithUnacked, 0);
});

test("registry - a job the stream refused leaves nothing kept for its server", async (t) => {
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, pino({ level: "silent" }));
  registry.attach(stream("s1", "c1", false).handle);
  t.is(await bus.dispatchToAll("s1", execJob("o1")), "not_connected");
  t.is(registry.serversWithUnacked, 0);
  // Nor is it sent again on the next stream.
  const next = stream("s1", "c2");
  registry.attach(next.handle);
  t.deepEqual(next.sent, []);
});

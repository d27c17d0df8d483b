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

/** A stream last heard at `heardAt` (mutable), and whether it was closed. */
function heardStream(serverId: string, heardAt: number) {
  const s = {
    closed: "",
    handle: {
      connectionId: `c-${serverId}`,
      serverId,
      credentialHash: "h",
      lastHeardAt: heardAt,
      sendJob: () => true,
      cancelJob: () => {},
      close: (reason: string) => {
        s.closed = reason;
      },
    },
  };
  return s;
}

test("registry - a stream whose agent sent nothing past the limit is closed and forgotten; one heard from is kept", async (t) => {
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, pino({ level: "silent" }));
  let clock = 1_000_000;
  registry.closeWhenSilent(30_000, 5000, () => clock);
  t.teardown(() => registry.closeAll("test over"));
  const quiet = heardStream("s1", clock);
  const talking = heardStream("s2", clock);
  registry.attach(quiet.handle);
  registry.attach(talking.handle);
  // Looks on time, every 5 s; s2 heartbeats every 5 s, s1 says nothing.
  for (let i = 0; i < 6; i++) {
    clock += 5000;
    talking.handle.lastHeardAt = clock;
    t.is(registry.closeSilent(), 0, `${(i + 1) * 5} s: not past the limit`);
  }
  clock += 5000;
  talking.handle.lastHeardAt = clock;
  t.is(registry.closeSilent(), 1);
  t.regex(quiet.closed, /nothing from the agent for 35 s/);
  t.is(talking.closed, "");
  t.is(registry.size, 1);
  // Forgotten: no longer served on the bus.
  t.is(await bus.dispatchToAll("s1", execJob("o1")), "not_connected");
  t.is(await bus.dispatchToAll("s2", execJob("o2")), "on_stream");
});

test("registry - a look that comes late closes nothing: what the agents sent may still be unread", (t) => {
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, pino({ level: "silent" }));
  let clock = 1_000_000;
  registry.closeWhenSilent(30_000, 5000, () => clock);
  t.teardown(() => registry.closeAll("test over"));
  const s = heardStream("s1", clock);
  registry.attach(s.handle);
  // The process did not run for 40 s (a pause, a starved machine): the first look after it is late.
  clock += 40_000;
  t.is(registry.closeSilent(), 0);
  t.is(s.closed, "");
  // The messages read meanwhile count; had none come, the next look, on time, closes it.
  clock += 5000;
  t.is(registry.closeSilent(), 1);
  t.not(s.closed, "");
});

test("registry - a stream with no time of its last message is never closed for silence", (t) => {
  const registry = new StreamRegistry(new MemoryBus(), pino({ level: "silent" }));
  let clock = 1_000_000;
  registry.closeWhenSilent(30_000, 5000, () => clock);
  t.teardown(() => registry.closeAll("test over"));
  registry.attach(stream("s1", "c1").handle);
  for (let i = 0; i < 20; i++) {
    clock += 5000;
    t.is(registry.closeSilent(), 0);
  }
  t.is(registry.size, 1);
});

test("registry - settlement plans are kept for 1,000 jobs at most; past that the hint goes without its plan", async (t) => {
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, pino({ level: "silent" }));
  registry.attach(stream("s1", "c1").handle);
  const hint = {
    seq: 1,
    head: null,
    operationType: "route_sync",
    startedAt: 1,
    runId: null,
    settle: { plan: 1 },
  };
  for (let i = 0; i <= 1_000; i++) t.is(await bus.dispatchToAll("s1", execJob(`o${i}`), hint), "on_stream");
  t.deepEqual(registry.takeHint("o0")?.settle, { plan: 1 });
  const past = registry.takeHint("o1000");
  t.is(past?.seq, 1, "the hint itself is kept");
  t.is(past?.settle, undefined, "its plan is not");
  // A plan taken frees its place.
  t.is(await bus.dispatchToAll("s1", execJob("o1001"), hint), "on_stream");
  t.deepEqual(registry.takeHint("o1001")?.settle, { plan: 1 });
});

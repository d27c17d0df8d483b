// A gateway's attach of an agent's stream, over a real nats-server: once its promise resolves
// (the stream's Welcome waits for it, agent-stream.ts), an api on another NATS connection
// finds the server connected and reaches it with a job at once, with no retry. Before, the
// Welcome went out while the subscription was still on its way to the NATS server, and a
// dashboard read or a first exec right after the agent connected could answer "not connected".
import { randomUUID } from "node:crypto";
import { Job } from "@relayctl/proto";
import test from "ava";
import pino from "pino";
import { connectNatsBus } from "../control-plane/src/bus/nats-bus";
import { type StreamHandle, StreamRegistry } from "../control-plane/src/gateway/registry";
import { cleanupAll } from "./harness/cleanup";
import { sharedNats } from "./harness/nats";

test.after.always(cleanupAll);

const log = pino({ level: "silent" });

function handle(serverId: string, sent: string[]): StreamHandle {
  return {
    connectionId: randomUUID(),
    serverId,
    credentialHash: "h",
    sendJob: (job) => {
      sent.push(job.operationId);
      return true;
    },
    cancelJob: () => {},
    close: () => {},
  };
}

async function buses(t: import("ava").ExecutionContext) {
  const nats = await sharedNats();
  const api = await connectNatsBus([nats.url], log, "attach-api");
  const gateway = await connectNatsBus([nats.url], log, "attach-gateway");
  t.teardown(async () => void (await Promise.all([api.close(), gateway.close()])));
  return { api, gateway };
}

test("gateway attach - once it resolves, another connection finds the server connected and reaches it with a job", async (t) => {
  const { api, gateway } = await buses(t);
  const registry = new StreamRegistry(gateway, log);
  for (let round = 0; round < 20; round++) {
    const serverId = randomUUID();
    const sent: string[] = [];
    await registry.attach(handle(serverId, sent));
    t.deepEqual([...(await api.connectedServers([serverId]))], [serverId], `round ${round}: presence`);
    const job = Job.fromPartial({
      operationId: randomUUID(),
      kind: { $case: "exec", exec: { command: "true" } },
    });
    t.is(await api.dispatch(serverId, job), "on_stream", `round ${round}: the first job`);
    t.deepEqual(sent, [job.operationId]);
  }
});

test("gateway attach - a storm of attaches in one tick: every one confirmed by the time its promise resolves", async (t) => {
  const { api, gateway } = await buses(t);
  const registry = new StreamRegistry(gateway, log);
  const ids = Array.from({ length: 500 }, () => randomUUID());
  const settled: string[] = [];
  // Each asks at the moment its own attach resolves, as its stream's Welcome would go out then.
  const asked = await Promise.all(
    ids.map(async (id) => {
      await registry.attach(handle(id, []));
      settled.push(id);
      return (await api.connectedServers([id])).has(id);
    }),
  );
  t.is(settled.length, ids.length);
  t.is(asked.filter(Boolean).length, ids.length, "every server connected when its attach resolved");
});

// The gateway's side of a job sent with its operation's start (bus/job-start.ts), over a
// real nats-server: the registry commits the start before the job goes on the agent's
// stream, and refuses the job, putting nothing on the stream, when the start is not
// committed or it cannot commit starts at all. The api then hears the refusal.
import { randomUUID } from "node:crypto";
import { Job } from "@relayctl/proto";
import test from "ava";
import pino from "pino";
import type { JobStart } from "../control-plane/src/bus/job-start";
import { connectNatsBus } from "../control-plane/src/bus/nats-bus";
import { type StreamHandle, StreamRegistry } from "../control-plane/src/gateway/registry";
import { buildOperation } from "../control-plane/src/operations/store";
import { cleanupAll } from "./harness/cleanup";
import { sharedNats } from "./harness/nats";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const log = pino({ level: "silent" });

/** A server's stream that records what went on it ("stream <id>") in `steps`, beside "commit <id>". */
function setUp() {
  const steps: string[] = [];
  const serverId = randomUUID();
  const tenantId = randomUUID();
  const handle: StreamHandle = {
    connectionId: "c1",
    serverId,
    tenantId,
    credentialHash: "h",
    sendJob: (job) => {
      steps.push(`stream ${job.operationId}`);
      return true;
    },
    cancelJob: () => {},
    close: () => {},
  };
  return { steps, serverId, tenantId, handle };
}

async function buses(t: import("ava").ExecutionContext) {
  const nats = await sharedNats();
  const api = await connectNatsBus([nats.url], log, "job-start-api");
  const gateway = await connectNatsBus([nats.url], log, "job-start-gateway");
  t.teardown(async () => void (await Promise.all([api.close(), gateway.close()])));
  return { api, gateway };
}

function startOn(serverId: string, tenantId: string) {
  const start = buildOperation({
    tenantId,
    serverId,
    operationType: "exec",
    keyId: null,
    runId: null,
    leaseMs: 30_000,
    deadlineAt: Date.now() + 60_000,
    audit: { command: "true" },
  });
  const job = Job.fromPartial({
    operationId: start.row.id,
    kind: { $case: "exec", exec: { command: "true" } },
  });
  const hint = { seq: 0, head: null, operationType: "exec", startedAt: start.row.started_at, runId: null };
  return { start, job, hint };
}

/** Sends a start with its job and waits until a gateway refuses it; the job. */
async function refusedStart(
  api: Awaited<ReturnType<typeof buses>>["api"],
  serverId: string,
  tenantId: string,
) {
  const { start, job, hint } = startOn(serverId, tenantId);
  const waiter = await api.awaitDone(job.operationId);
  api.sendStart!(serverId, job, hint, start);
  await waiter.refused;
  waiter.cancel();
  return job;
}

/** Waits until the gateway serves the server (a plain job answered on_stream), then forgets that job's step. */
async function served(api: Awaited<ReturnType<typeof buses>>["api"], s: ReturnType<typeof setUp>) {
  const plain = Job.fromPartial({
    operationId: randomUUID(),
    kind: { $case: "exec", exec: { command: "true" } },
  });
  await pollUntil(async () => ((await api.dispatch(s.serverId, plain)) === "on_stream" ? true : undefined), {
    what: "the gateway's subscription",
    timeoutMs: 5000,
  });
  s.steps.length = 0;
  return plain;
}

test("gateway job start - the start is committed before the job goes on the stream", async (t) => {
  const { api, gateway } = await buses(t);
  const s = setUp();
  const committed: JobStart[] = [];
  const registry = new StreamRegistry(gateway, log, async (start) => {
    s.steps.push(`commit ${start.row.id}`);
    committed.push(start);
    return true;
  });
  registry.attach(s.handle);
  await served(api, s);
  const { start, job, hint } = startOn(s.serverId, s.tenantId);
  const waiter = await api.awaitDone(job.operationId);
  let refused = false;
  void waiter.refused.then(() => {
    refused = true;
  });
  api.sendStart!(s.serverId, job, hint, start);
  await pollUntil(async () => (s.steps.length === 2 ? true : undefined), {
    what: "the job",
    timeoutMs: 5000,
  });
  t.deepEqual(s.steps, [`commit ${job.operationId}`, `stream ${job.operationId}`]);
  t.deepEqual(committed, [start]);
  // A plain job sent after it, on the same connection: had the job been answered, the answer came first.
  await served(api, s);
  t.false(refused, "a job on the stream is answered by its completion alone");
  waiter.cancel();
});

test("gateway job start - a start not committed puts nothing on the stream and the api hears a refusal", async (t) => {
  const { api, gateway } = await buses(t);
  const s = setUp();
  const registry = new StreamRegistry(gateway, log, async (start) => {
    s.steps.push(`commit ${start.row.id}`);
    return false;
  });
  registry.attach(s.handle);
  await served(api, s);
  const job = await refusedStart(api, s.serverId, s.tenantId);
  t.true(s.steps.includes(`commit ${job.operationId}`));
  t.false(
    s.steps.some((x) => x.startsWith("stream ")),
    "no job went on the stream",
  );
});

test("gateway job start - a gateway that cannot commit starts refuses every job with one, and still takes plain jobs", async (t) => {
  const { api, gateway } = await buses(t);
  const s = setUp();
  const registry = new StreamRegistry(gateway, log);
  registry.attach(s.handle);
  await served(api, s);
  await refusedStart(api, s.serverId, s.tenantId);
  t.deepEqual(s.steps, [], "nothing went on the stream");
  const plain = Job.fromPartial({
    operationId: randomUUID(),
    kind: { $case: "exec", exec: { command: "true" } },
  });
  t.is(await api.dispatch(s.serverId, plain), "on_stream");
  t.deepEqual(s.steps, [`stream ${plain.operationId}`], "a plain job still does");
});

test("gateway job start - a start in another tenant's chain than the server's is refused: nothing committed, nothing on the stream", async (t) => {
  const { api, gateway } = await buses(t);
  const s = setUp();
  const registry = new StreamRegistry(gateway, log, async (start) => {
    s.steps.push(`commit ${start.row.id}`);
    return true;
  });
  registry.attach(s.handle);
  await served(api, s);
  await refusedStart(api, s.serverId, randomUUID());
  t.deepEqual(s.steps, [], "nothing committed, nothing on the stream");
});

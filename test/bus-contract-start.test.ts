// The bus contract of a job sent with its operation's start (JobBus.sendStart,
// bus/job-start.ts), NATS only: the in-process bus has no sendStart (its api commits
// its starts itself). What the api sends is what the gateway's handler receives; a
// start that does not describe its job never reaches it; and a gateway of the version
// before, which serves only the server's family one token deep, never sees one.
import type { Job } from "@relayctl/proto";
import { JobStatus } from "@relayctl/proto";
import test from "ava";
import { connect } from "nats";
import pino from "pino";
import { codec } from "../control-plane/src/bus/codec";
import type { JobStart } from "../control-plane/src/bus/job-start";
import { connectNatsBus } from "../control-plane/src/bus/nats-bus";
import { buildOperation } from "../control-plane/src/operations/store";
import { dispatchWhenServed, execJob, unsettled } from "./harness/bus-jobs";
import { cleanupAll } from "./harness/cleanup";
import { sharedNats } from "./harness/nats";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

const log = pino({ level: "silent" });
const uuid = () => crypto.randomUUID();

/** The start of an exec on `serverId` as the api builds it (operations/store.ts), with non-ASCII in its event. */
function execStart(serverId: string) {
  return buildOperation({
    tenantId: uuid(),
    serverId,
    operationType: "exec",
    keyId: uuid(),
    runId: "run-é-1",
    leaseMs: 30_000,
    deadlineAt: Date.now() + 3_600_000,
    audit: {
      command: "echo 'héllo wörld ✓'",
      env_keys: ["GREETING"],
      server_id: serverId,
      server_name: "web-1",
    },
  });
}

const hintOfStart = (start: JobStart) => ({
  seq: 0,
  head: null,
  operationType: "exec",
  startedAt: start.row.started_at,
  runId: start.row.run_id,
});

test("bus contract (nats) - sendStart: the gateway's handler gets the job with its start and hint; a refusal, or a start that does not describe the job on that server, resolves refused", async (t) => {
  const nats = await sharedNats();
  const api = await connectNatsBus([nats.url], log, "contract-api");
  const gateway = await connectNatsBus([nats.url], log, "contract-gateway");
  t.teardown(async () => void (await Promise.all([api.close(), gateway.close()])));
  const serverId = uuid();
  let take = true;
  const received: { job: Job; start?: JobStart; hint?: unknown }[] = [];
  t.teardown(
    gateway.serveServer(serverId, async (job, hint, start) => {
      received.push({ job, start, hint });
      return take;
    }),
  );
  await dispatchWhenServed(api, serverId, execJob(uuid()));
  received.length = 0;

  const start = execStart(serverId);
  const job = execJob(start.row.id);
  const waiter = await api.awaitDone(job.operationId);
  let refused = false;
  void waiter.refused.then(() => {
    refused = true;
  });
  api.sendStart!(serverId, job, hintOfStart(start), start);
  await pollUntil(async () => (received.length > 0 ? true : undefined), { what: "the job", timeoutMs: 5000 });
  t.deepEqual(received[0]!.job, job);
  t.deepEqual(received[0]!.start, start, "the start as sent, non-ASCII intact");
  t.deepEqual(received[0]!.hint, hintOfStart(start));
  gateway.publishDone({ operationId: job.operationId, status: JobStatus.JOB_STATUS_COMPLETED, ...unsettled });
  await waiter.done;
  t.false(refused, "a job on the stream is answered by its completion alone");
  waiter.cancel();

  // Refused by the handler (the start not committed, or no stream): the api hears it.
  take = false;
  const other = execStart(serverId);
  const w = await api.awaitDone(other.row.id);
  api.sendStart!(serverId, execJob(other.row.id), hintOfStart(other), other);
  await w.refused;
  w.cancel();
  t.is(received.at(-1)?.start?.row.id, other.row.id);

  // A start of another server's operation, or another job's: refused before the handler.
  const count = received.length;
  for (const wrong of [execStart(uuid()), { ...execStart(serverId), row: { ...execStart(serverId).row } }]) {
    const id = wrong.row.server_id === serverId ? uuid() : wrong.row.id;
    const r = await api.awaitDone(id);
    api.sendStart!(serverId, execJob(id), hintOfStart(wrong), wrong);
    await r.refused;
    r.cancel();
  }
  t.is(received.length, count, "no start that does not describe its job reached the handler");
});

test("bus contract (nats) - sendStart never reaches a gateway that does not commit starts (one serving relayctl.v1.agent.<server>.* only): no responders, refused", async (t) => {
  const nats = await sharedNats();
  const api = await connectNatsBus([nats.url], log, "contract-api");
  t.teardown(() => api.close());
  // A gateway of the version before: the server's family, one token deep, answering jobs.
  const old = await connect({ servers: nats.url });
  t.teardown(() => old.close());
  const serverId = uuid();
  const seen: string[] = [];
  old.subscribe(`relayctl.v1.agent.${serverId}.*`, {
    callback: (_err, msg) => {
      seen.push(msg.subject);
      msg.respond(codec.reply.encode(true));
    },
  });
  await old.flush();
  const start = execStart(serverId);
  const waiter = await api.awaitDone(start.row.id);
  api.sendStart!(serverId, execJob(start.row.id), hintOfStart(start), start);
  await waiter.refused;
  waiter.cancel();
  // The plain job still reaches it (what the api sends once it committed the start itself).
  t.is(await api.dispatch(serverId, execJob(start.row.id)), "on_stream");
  t.deepEqual(seen, [`relayctl.v1.agent.${serverId}.job`]);
});

// One contract, both JobBus adapters: the NATS bus (api and gateway as two
// connections to a real nats-server) and the in-process bus of `make dev`. What
// the api sends is exactly what the gateway's handler receives, and the answers
// (on stream, not connected, completions, takeovers) mean the same on both.
import {
  JobStatus,
  type Job,
  LogStream,
  LogsEnd,
  type LogsOutput,
  type OperationDone,
  RouteOutcomeStatus,
} from "@relayctl/proto";
import type { JobBus } from "../control-plane/src/bus/job-bus";
import { MemoryBus } from "../control-plane/src/bus/memory-bus";
import { connectNatsBus } from "../control-plane/src/bus/nats-bus";
import test from "ava";
import pino from "pino";
import { cleanupAll } from "./harness/cleanup";
import { sharedNats } from "./harness/nats";
import { dispatchWhenServed, execJob, unsettled } from "./harness/bus-jobs";
import { pollUntil } from "./harness/wait";

interface Pair {
  /** The api role's side. */
  api: JobBus;
  /** The gateway role's side (the same bus in process). */
  gateway: JobBus;
  close(): Promise<void>;
}

const log = pino({ level: "silent" });

test.after.always(cleanupAll);

const adapters: Record<string, () => Promise<Pair>> = {
  memory: async () => {
    const bus = new MemoryBus();
    return { api: bus, gateway: bus, close: () => bus.close() };
  },
  nats: async () => {
    const nats = await sharedNats();
    const api = await connectNatsBus([nats.url], log, "contract-api");
    const gateway = await connectNatsBus([nats.url], log, "contract-gateway");
    return { api, gateway, close: async () => void (await Promise.all([api.close(), gateway.close()])) };
  },
};

const uuid = () => crypto.randomUUID();

for (const [name, open] of Object.entries(adapters)) {
  test(`bus contract (${name}) - no gateway holds the server: not connected`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    t.is(await bus.api.dispatch(uuid(), execJob(uuid())), "not_connected");
  });

  test(`bus contract (${name}) - the handler receives exactly the job that was sent`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const serverId = uuid();
    const received: Job[] = [];
    const stop = bus.gateway.serveServer(serverId, async (job) => {
      received.push(job);
      return true;
    });
    t.teardown(stop);
    const exec = execJob(uuid());
    await dispatchWhenServed(bus.api, serverId, exec);
    const routeSync: Job = {
      operationId: uuid(),
      traceContext: {},
      requestId: "",
      kind: {
        $case: "routeSync",
        routeSync: {
          routes: [
            {
              applicationId: uuid(),
              containerName: "web",
              containerPort: 8080,
              imageTag: "web:1",
              fqdns: ["a.example.com"],
            },
          ],
          knownApplicationIds: [uuid()],
          removeApplicationIds: [],
          deadlineSeconds: 120,
          drainApplicationIds: [],
          undrainApplicationIds: [],
        },
      },
    };
    t.is(await bus.api.dispatch(serverId, routeSync), "on_stream");
    t.deepEqual(received.at(-2), exec);
    t.deepEqual(received.at(-1), routeSync);
  });

  test(`bus contract (${name}) - progress announcements and the done event wake the operation's live log, and only its`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const [id, other] = [uuid(), uuid()];
    const heard: string[] = [];
    const unsubscribe = await bus.api.subscribeProgress(id, (what) => heard.push(what));
    bus.gateway.publishProgress(other);
    bus.gateway.publishProgress(id);
    bus.gateway.publishProgress(id);
    bus.gateway.publishDone({ operationId: other, status: JobStatus.JOB_STATUS_FAILED, ...unsettled });
    bus.gateway.publishDone({ operationId: id, status: JobStatus.JOB_STATUS_COMPLETED, ...unsettled });
    await pollUntil(async () => (heard.length === 3 ? true : undefined), {
      what: "3 wake-ups",
      timeoutMs: 5000,
    });
    t.deepEqual(heard, ["progress", "progress", "done"]);
    unsubscribe();
    bus.gateway.publishProgress(id);
    // A round trip after the publish: had the unsubscribed handler been called, it would have been by now.
    await bus.api.ping(5000);
    t.is(heard.length, 3);
  });

  test(`bus contract (${name}) - live output reaches its one subscriber in order, and a cancel reaches the server's gateway`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const [serverId, readId, otherId] = [uuid(), uuid(), uuid()];
    const heard: LogsOutput[] = [];
    const unsubscribe = await bus.api.subscribeLive(readId, (o) => heard.push(o));
    const line = (seq: number, end = LogsEnd.LOGS_END_UNSPECIFIED): LogsOutput => ({
      operationId: readId,
      seq,
      lines: [{ stream: LogStream.LOG_STREAM_STDERR, text: `line ${seq} é` }],
      end,
      endDetail: end === LogsEnd.LOGS_END_UNSPECIFIED ? "" : "the container's log ended",
    });
    // Subscribed before the first line goes out: nothing is missed, nothing of another read is heard.
    bus.gateway.publishLive({ ...line(1), operationId: otherId });
    for (let seq = 1; seq <= 20; seq++) bus.gateway.publishLive(line(seq));
    bus.gateway.publishLive(line(21, LogsEnd.LOGS_END_CONTAINER_GONE));
    await pollUntil(async () => (heard.length === 21 ? true : undefined), {
      what: "21 outputs",
      timeoutMs: 5000,
    });
    t.deepEqual(heard, [
      ...Array.from({ length: 20 }, (_, i) => line(i + 1)),
      line(21, LogsEnd.LOGS_END_CONTAINER_GONE),
    ]);
    unsubscribe();

    const cancelled: string[] = [];
    const stop = bus.gateway.onCancel(serverId, (id) => cancelled.push(id));
    t.teardown(stop);
    // A subscription reaches the NATS server a moment after onCancel: cancel until one is heard.
    await pollUntil(
      async () => {
        bus.api.cancelJob(serverId, readId);
        return cancelled.length > 0 ? true : undefined;
      },
      { what: "the cancel at the gateway", timeoutMs: 5000 },
    );
    t.true(cancelled.every((id) => id === readId));
    bus.api.cancelJob(uuid(), otherId);
    bus.gateway.publishLive(line(22));
    await bus.api.ping(2000);
    t.false(cancelled.includes(otherId), "another server's cancel is not heard");
    t.is(heard.length, 21, "nothing is heard after unsubscribing");
  });

  test(`bus contract (${name}) - a handler that refuses or throws is not connected; unsubscribed is not connected`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const serverId = uuid();
    let mode: "refuse" | "throw" = "refuse";
    let calls = 0;
    const stop = bus.gateway.serveServer(serverId, async () => {
      calls++;
      if (mode === "throw") throw new Error("stream gone");
      return false;
    });
    await pollUntil(
      async () => {
        if (calls > 0) return true;
        await bus.api.dispatch(serverId, execJob(uuid()));
        return undefined;
      },
      {
        what: "the handler to be reached",
        timeoutMs: 5000,
      },
    );
    t.is(await bus.api.dispatch(serverId, execJob(uuid())), "not_connected");
    mode = "throw";
    const before = calls;
    t.is(await bus.api.dispatch(serverId, execJob(uuid())), "not_connected");
    t.is(calls, before + 1);
    stop();
    // A request racing the UNSUB reaches no handler and gets no answer: "unknown" after the
    // dispatch timeout (5 s), hence the longer deadline.
    await pollUntil(
      async () =>
        (await bus.api.dispatch(serverId, execJob(uuid()))) === "not_connected" ? true : undefined,
      {
        what: "the unsubscription",
        timeoutMs: 15_000,
      },
    );
    t.is(calls, before + 1);
  });

  test(`bus contract (${name}) - a completion reaches its waiter with result and detail, and only its waiter`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const id = uuid();
    const other = uuid();
    const waiter = await bus.api.awaitDone(id);
    const otherWaiter = await bus.api.awaitDone(other);
    otherWaiter.cancel();
    let otherDone = false;
    void otherWaiter.done.then(() => {
      otherDone = true;
    });
    const event: OperationDone = {
      operationId: id,
      status: JobStatus.JOB_STATUS_COMPLETED,
      result: {
        operationId: id,
        status: JobStatus.JOB_STATUS_COMPLETED,
        exitCode: 0,
        stdout: "app-1 synced\n",
        stderr: "",
        durationMs: 12,
        error: "",
        detail: {
          $case: "routeSync",
          routeSync: {
            proxy: "caddy",
            upstreamMode: "host",
            routes: [
              {
                applicationId: "app-1",
                status: RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_SYNCED,
                signatureHash: "sha256:00",
                fqdns: ["a.example.com"],
                upstream: "127.0.0.1:8080",
                error: "",
              },
            ],
            removedApplicationIds: ["app-0"],
          },
        },
      },
      // The settlement's flag and the chain head the completion left ride along, seq above 2^32.
      settled: true,
      chainSeq: 5_000_000_001,
      chainHead: "ab".repeat(32),
    };
    bus.gateway.publishDone({ operationId: other, status: JobStatus.JOB_STATUS_FAILED, ...unsettled });
    bus.gateway.publishDone(event);
    t.deepEqual(await waiter.done, event);
    waiter.cancel();
    t.false(otherDone);
  });

  test(`bus contract (${name}) - send: a job on the stream is answered by its completion alone; no holder, a refusal or a throw resolve refused`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    // No gateway holds the server: on NATS the server's no-responders status is the refusal.
    const orphan = uuid();
    const nobody = await bus.api.awaitDone(orphan);
    bus.api.send(uuid(), execJob(orphan));
    await nobody.refused;
    nobody.cancel();

    const serverId = uuid();
    let mode: "take" | "refuse" | "throw" = "take";
    const received: Job[] = [];
    t.teardown(
      bus.gateway.serveServer(serverId, async (job) => {
        received.push(job);
        if (mode === "throw") throw new Error("stream gone");
        return mode === "take";
      }),
    );
    await dispatchWhenServed(bus.api, serverId, execJob(uuid()));
    const id = uuid();
    const waiter = await bus.api.awaitDone(id);
    let refused = false;
    void waiter.refused.then(() => {
      refused = true;
    });
    const job = execJob(id);
    bus.api.send(serverId, job);
    await pollUntil(async () => (received.some((j) => j.operationId === id) ? true : undefined), {
      what: "the job at the gateway",
      timeoutMs: 5000,
    });
    t.deepEqual(received.at(-1), job);
    // Published after the handler answered, on the same connection as any reply: were the
    // job answered, the answer would arrive first.
    bus.gateway.publishDone({ operationId: id, status: JobStatus.JOB_STATUS_COMPLETED, ...unsettled });
    t.is((await waiter.done).operationId, id);
    t.false(refused);
    waiter.cancel();

    for (const m of ["refuse", "throw"] as const) {
      mode = m;
      const rid = uuid();
      const w = await bus.api.awaitDone(rid);
      bus.api.send(serverId, execJob(rid));
      await w.refused;
      w.cancel();
      t.is(received.at(-1)?.operationId, rid, m);
    }
  });

  test(`bus contract (${name}) - a takeover reaches the other holders of the server until they unsubscribe`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const serverId = uuid();
    const seen: string[] = [];
    const stop = bus.gateway.onTakeover(serverId, (connectionId) => seen.push(connectionId));
    await pollUntil(
      () => {
        bus.api.publishTakeover(serverId, "conn-1");
        return seen.includes("conn-1") ? true : undefined;
      },
      { what: "the takeover", timeoutMs: 5000 },
    );
    stop();
    const count = seen.length;
    bus.api.publishTakeover(serverId, "conn-2");
    // The bus delivers in order on one connection: a takeover published after the next one arrives.
    const later = uuid();
    const witness: string[] = [];
    const stopWitness = bus.gateway.onTakeover(later, (c) => witness.push(c));
    t.teardown(stopWitness);
    await pollUntil(
      () => {
        bus.api.publishTakeover(later, "witness");
        return witness.length > 0 ? true : undefined;
      },
      { what: "a later takeover", timeoutMs: 5000 },
    );
    t.is(seen.length, count);
    t.false(seen.includes("conn-2"));
  });
}

// NATS only (the in-process bus always answers): a job whose answer never comes may be on
// the agent's stream (seen as a risk in the chaos test: a reply lost with the api's NATS
// node), so it must not come back "not connected", which records the operation as not run.
test("bus contract (nats) - a gateway that takes the job but never answers: unknown, not 'not connected'", async (t) => {
  const bus = await adapters.nats!();
  t.teardown(() => bus.close());
  const serverId = uuid();
  const taken: string[] = [];
  t.teardown(
    bus.gateway.serveServer(serverId, (job) => {
      taken.push(job.operationId);
      return new Promise<boolean>(() => {}); // the answer is lost
    }),
  );
  const job = execJob(uuid());
  const outcome = await pollUntil(
    async () => {
      const o = await bus.api.dispatch(serverId, job);
      return o === "not_connected" && taken.length === 0 ? undefined : o; // not subscribed yet
    },
    { what: "the gateway's subscription", timeoutMs: 20_000 },
  );
  t.is(outcome, "unknown");
  t.deepEqual(taken, [job.operationId]);
});

for (const [name, open] of Object.entries(adapters)) {
  test(`bus contract (${name}) - a served server answers presence probes; once no longer served, it does not`, async (t) => {
    const bus = await open();
    t.teardown(() => bus.close());
    const served = uuid();
    const other = uuid();
    const stop = bus.gateway.serveServer(served, async () => true);
    const seen = await pollUntil(
      async () => {
        const connected = await bus.api.connectedServers([served, other]);
        return connected.has(served) ? connected : undefined;
      },
      { what: "the gateway's subscription", timeoutMs: 5000 },
    );
    t.deepEqual([...seen], [served]);
    stop();
    const gone = await pollUntil(
      async () => ((await bus.api.connectedServers([served])).size === 0 ? true : undefined),
      { what: "the unsubscription", timeoutMs: 5000 },
    );
    t.true(gone);
    t.is(await bus.api.dispatch(served, execJob(uuid())), "not_connected");
  });
}

// NATS only: the gateway serves a server's job subject and its presence probes on one subscription
// to the server's subject family (relayctl.v1.agent.<server>.*), where its takeovers and cancels
// arrive too: those are never taken for a job.
test("bus contract (nats) - a served server's presence probes, takeovers and cancels never reach its job handler", async (t) => {
  const nats = await sharedNats();
  const lines: string[] = [];
  const gatewayLog = pino({ level: "info" }, { write: (line: string) => lines.push(line) });
  const api = await connectNatsBus([nats.url], log, "contract-api");
  const gateway = await connectNatsBus([nats.url], gatewayLog, "contract-gateway");
  t.teardown(async () => void (await Promise.all([api.close(), gateway.close()])));
  const serverId = uuid();
  const jobs: string[] = [];
  t.teardown(
    gateway.serveServer(serverId, async (job) => {
      jobs.push(job.operationId);
      return true;
    }),
  );
  const takeovers: string[] = [];
  t.teardown(gateway.onTakeover(serverId, (c) => takeovers.push(c)));
  const job = execJob(uuid());
  await dispatchWhenServed(api, serverId, job);
  // A presence probe is answered, and is no job either.
  t.true((await api.connectedServers([serverId])).has(serverId));
  api.publishTakeover(serverId, "conn-1");
  api.cancelJob(serverId, uuid());
  // Published after them on the same connection: once it is answered, they have been delivered.
  await pollUntil(async () => (takeovers.length > 0 ? true : undefined), {
    what: "the takeover",
    timeoutMs: 5000,
  });
  t.is(await api.dispatch(serverId, execJob(uuid())), "on_stream");
  t.is(jobs.length, 2);
  t.is(jobs[0], job.operationId);
  t.deepEqual(
    lines.filter((l) => l.includes("undecodable job") || l.includes("job handler failed")),
    [],
  );
});

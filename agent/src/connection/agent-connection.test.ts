// The connection against a real grpc-js server on 127.0.0.1:0 that speaks the
// gateway side of the contract (a real network round trip, no mocked client).
import { mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, ServerCredentials, type ServerDuplexStream, status } from "@grpc/grpc-js";
import { type AgentMessage, AgentGatewayService, type GatewayMessage, type Job } from "@relayctl/proto";
import test, { type ExecutionContext } from "ava";
import { Dispatcher } from "../jobs/dispatcher.js";
import { silentLogger } from "../log.js";
import { PtyRunner } from "../runner/pty-runner.js";
import { AgentConnection } from "./agent-connection.js";
import { freePort } from "@relayctl/devkit";

const CREDENTIAL = "rag_test_credential";
type Stream = ServerDuplexStream<AgentMessage, GatewayMessage>;

/** A fake gateway: hands every accepted stream and its messages to `onStream`. */
async function startGateway(t: ExecutionContext, onStream: (stream: Stream, index: number) => void) {
  const server = new Server();
  let count = 0;
  server.addService(AgentGatewayService, {
    connect: (stream: Stream) => {
      if (stream.metadata.get("authorization")[0] !== `Bearer ${CREDENTIAL}`) {
        stream.destroy(Object.assign(new Error("bad credential"), { code: status.UNAUTHENTICATED }));
        return;
      }
      onStream(stream, count++);
    },
  });
  const picked = await freePort(); // not port 0: see @relayctl/devkit's listenOnFreePort
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${picked}`, ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  t.teardown(() => server.forceShutdown());
  return `grpc://127.0.0.1:${port}`;
}

async function startAgent(t: ExecutionContext, gatewayUrls: string[], random?: () => number) {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const runner = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 65536, killGraceMs: 300 });
  // Every job acked at once (not by its result): the tests below watch the acks.
  const dispatcher = await Dispatcher.open({ stateDir, runner, log: silentLogger(), ackAfterMs: 0 });
  const connection = new AgentConnection({
    gatewayUrls,
    credential: CREDENTIAL,
    backoff: { minMs: 5, maxMs: 20 },
    agentVersion: "0.0.0-test",
    dispatcher,
    log: silentLogger(),
    random,
  });
  t.teardown(async () => {
    await connection.stop();
    await dispatcher.idle();
    await dispatcher.close();
    await runner.close();
  });
  connection.start();
  return { stateDir, connection };
}

const welcome = (heartbeatIntervalMs = 5000): GatewayMessage => ({
  msg: { $case: "welcome", welcome: { serverId: "srv-1", serverName: "web-1", heartbeatIntervalMs } },
});
const job = (operationId: string, command: string): GatewayMessage => ({
  msg: {
    $case: "job",
    job: {
      operationId,
      traceContext: {},
      requestId: "",
      kind: {
        $case: "exec",
        exec: { command, workingDirectory: "", env: {}, deadlineSeconds: 30, streamOutput: false },
      },
    },
  } satisfies { $case: "job"; job: Job },
});

/** Promise.withResolvers is Node 22+. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

async function pollUntil(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("connection - hello, welcome, heartbeat, job acked, result sent and deleted on ack", async (t) => {
  const id = "aaaaaaaa-0000-4000-8000-000000000001";
  const seen: AgentMessage["msg"][] = [];
  const acked = deferred<void>();
  const url = await startGateway(t, (stream) => {
    stream.on("data", (m: AgentMessage) => {
      seen.push(m.msg);
      if (m.msg?.$case === "hello") {
        stream.write(welcome(20));
        stream.write(job(id, "echo from-agent"));
      }
      if (m.msg?.$case === "jobResult") {
        stream.write({ msg: { $case: "resultAck", resultAck: { operationId: id } } });
        acked.resolve();
      }
    });
  });
  const { stateDir, connection } = await startAgent(t, [url]);
  const connected = new Promise((resolve) => connection.once("connected", resolve));
  await connected;
  await acked.promise;
  await pollUntil(async () => (await readdir(join(stateDir, "results"))).length === 0);
  await pollUntil(async () => seen.some((m) => m?.$case === "heartbeat"));

  const hello = seen[0];
  t.is(hello?.$case, "hello");
  if (hello?.$case === "hello") {
    t.is(hello.hello.agentVersion, "0.0.0-test");
    t.regex(hello.hello.bootId, /^[0-9a-f-]{36}$/);
  }
  t.true(seen.some((m) => m?.$case === "jobAck" && m.jobAck.operationId === id));
  const result = seen.find((m) => m?.$case === "jobResult");
  t.like(result, { jobResult: { operationId: id, stdout: "from-agent\n", exitCode: 0 } });
});

test("connection - a command outlives a stream drop and its result arrives after the reconnect", async (t) => {
  const id = "aaaaaaaa-0000-4000-8000-000000000002";
  const stateDirBox: { dir?: string } = {};
  const resultOnStream = deferred<number>();
  const url = await startGateway(t, (stream, index) => {
    stream.on("data", (m: AgentMessage) => {
      if (m.msg?.$case === "hello") {
        stream.write(welcome());
        if (index === 0)
          stream.write(
            job(id, `while [ ! -e ${join(stateDirBox.dir!, "go")} ]; do sleep 0.01; done; echo late`),
          );
      }
      if (m.msg?.$case === "jobAck" && index === 0) stream.end(); // the gateway goes away mid-job
      if (m.msg?.$case === "jobResult") {
        stream.write({ msg: { $case: "resultAck", resultAck: { operationId: id } } });
        resultOnStream.resolve(index);
      }
    });
  });
  const { stateDir, connection } = await startAgent(t, [url]);
  stateDirBox.dir = stateDir;
  await new Promise((resolve) => connection.once("disconnected", resolve));
  await writeFile(join(stateDir, "go"), "");
  t.true((await resultOnStream.promise) >= 1, "result came on a later stream");
  await pollUntil(async () => (await readdir(join(stateDir, "results"))).length === 0);
});

test("connection - a refused gateway is skipped for the next one in the list", async (t) => {
  const url = await startGateway(t, (stream) => {
    stream.on("data", (m: AgentMessage) => {
      if (m.msg?.$case === "hello") stream.write(welcome());
    });
  });
  // A port nobody listens on: bind one, then shut it.
  const dead = new Server();
  const deadPort = await new Promise<number>((resolve, reject) =>
    dead.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  dead.forceShutdown();
  const { connection } = await startAgent(t, [`grpc://127.0.0.1:${deadPort}`, url]);
  const [, gatewayUrl] = await new Promise<[unknown, string]>((resolve) =>
    connection.once("connected", (w, u) => resolve([w, u])),
  );
  t.is(gatewayUrl, url);
});

test("connection - the first gateway dialled is a random one, so agents spread over the gateways", async (t) => {
  const answer = (stream: Stream) => {
    stream.on("data", (m: AgentMessage) => {
      if (m.msg?.$case === "hello") stream.write(welcome());
    });
  };
  const urls = [await startGateway(t, answer), await startGateway(t, answer)];
  const firstOf = async (random: () => number) => {
    const { connection } = await startAgent(t, urls, random);
    const [, gatewayUrl] = await new Promise<[unknown, string]>((resolve) =>
      connection.once("connected", (w, u) => resolve([w, u])),
    );
    await connection.stop();
    return gatewayUrl;
  };
  t.is(await firstOf(() => 0), urls[0]);
  t.is(await firstOf(() => 0.99), urls[1]);
});

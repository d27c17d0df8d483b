// An agent that goes silent is found by its missing heartbeats (registry.closeWhenSilent), not by
// HTTP/2 pings: a real gateway (grpc-js, the real stream handling) and a client speaking the
// agent protocol, its heartbeats every interval keeping its stream, their stop closing it.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Metadata, credentials } from "@grpc/grpc-js";
import { AgentGatewayClient, type GatewayMessage } from "@relayctl/proto";
import test from "ava";
import pino from "pino";
import { MemoryBus } from "../bus/memory-bus.js";
import { migrate, openDb } from "../db/knex.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { OperationService } from "../operations/service.js";
import { AckWriter } from "./ack-writer.js";
import { agentSilenceLimitMs } from "./agent-stream.js";
import { StreamRegistry } from "./registry.js";
import { startGateway } from "./server.js";
import { freePort } from "@relayctl/devkit";

const INTERVAL_MS = 150;
/** 6 intervals: 900 ms (the floor taken away for the test). */
const SILENCE_MS = agentSilenceLimitMs(INTERVAL_MS, 0);

async function gatewayWithOneServer() {
  const db = openDb(`sqlite://${join(mkdtempSync(join(tmpdir(), "relayctl-silence-")), "db.sqlite")}`);
  await migrate(db);
  await db("tenants").insert({ id: "t1", name: "t1", created_at: 0 });
  const credential = mintToken("rag_");
  await db("servers").insert({
    id: "s1",
    tenant_id: "t1",
    name: "s1",
    agent_credential_hash: sha256Hex(credential),
    created_at: 0,
  });
  const log = pino({ level: "silent" });
  const bus = new MemoryBus();
  const registry = new StreamRegistry(bus, log);
  const gateway = await startGateway(
    {
      db,
      bus,
      ops: new OperationService(db, bus, log, 60_000),
      registry,
      acks: new AckWriter(db, log),
      log,
      heartbeatIntervalMs: INTERVAL_MS,
      leaseMs: 60_000,
      agentSilenceFloorMs: 0,
    },
    { host: "127.0.0.1", port: await freePort() },
    undefined,
  );
  return { db, registry, gateway, credential };
}

/** Connects as the agent, says Hello, resolves once welcomed; `ended` resolves when the stream ends. */
async function connectAgent(url: string, credential: string) {
  const client = new AgentGatewayClient(url.replace("grpc://", ""), credentials.createInsecure());
  const md = new Metadata();
  md.set("authorization", `Bearer ${credential}`);
  const call = client.connect(md);
  const ended = new Promise<void>((resolve) => {
    call.on("error", () => resolve());
    call.on("end", () => resolve());
  });
  const welcomed = new Promise<void>((resolve) =>
    call.on("data", (m: GatewayMessage) => {
      if (m.msg?.$case === "welcome") resolve();
    }),
  );
  call.write({
    msg: {
      $case: "hello",
      hello: {
        agentVersion: "t",
        bootId: "b",
        hostname: "h",
        bootedAtUnixMs: 0,
        runningOperationIds: [],
        engine: undefined,
        proxy: undefined,
      },
    },
  });
  await welcomed;
  const heartbeat = () => call.write({ msg: { $case: "heartbeat", heartbeat: { runningOperationIds: [] } } });
  return { client, call, ended, heartbeat };
}

const sleepTicks = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("agent silence - heartbeats keep an agent's stream past the limit; their stop closes it", async (t) => {
  const g = await gatewayWithOneServer();
  t.teardown(async () => {
    await g.gateway.close();
    await g.db.destroy();
  });
  const agent = await connectAgent(g.gateway.url, g.credential);
  t.teardown(() => agent.client.close());
  while (g.registry.size === 0) await sleepTicks(10);
  let ended = false;
  void agent.ended.then(() => {
    ended = true;
  });
  // Heartbeats every interval for three times the limit: the stream stays.
  const until = Date.now() + 3 * SILENCE_MS;
  let lastSent = 0;
  while (Date.now() < until) {
    agent.heartbeat();
    lastSent = Date.now();
    await sleepTicks(INTERVAL_MS);
  }
  t.false(ended, "a heartbeating agent keeps its stream");
  t.is(g.registry.size, 1);
  // Silent now: its stream is closed once the limit has passed (polled, with a deadline).
  const deadline = Date.now() + 20 * SILENCE_MS;
  while (!ended && Date.now() < deadline) await sleepTicks(20);
  t.true(ended, "the silent agent's stream was closed");
  t.true(Date.now() - lastSent >= SILENCE_MS, "not before the limit after its last heartbeat");
  t.is(g.registry.size, 0);
});

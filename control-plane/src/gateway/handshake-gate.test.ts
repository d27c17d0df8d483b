import { once } from "node:events";
import { type Socket, connect, createServer } from "node:net";
import test, { type ExecutionContext } from "ava";
import { HandshakeGate, peerOf } from "./handshake-gate.js";
import { listenOnFreePort } from "@relayctl/devkit";

/** `n` real loopback connections: the server's side of each (what the gateway's listener admits). */
async function connections(t: ExecutionContext, n: number): Promise<{ server: Socket[]; client: Socket[] }> {
  const server: Socket[] = [];
  const listener = createServer((s) => server.push(s));
  const port = await listenOnFreePort(listener);
  const client: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const c = connect(port, "127.0.0.1");
    c.on("error", () => {});
    await once(c, "connect");
    client.push(c);
  }
  while (server.length < n) await new Promise((r) => setImmediate(r));
  t.teardown(() => {
    for (const s of [...server, ...client]) s.destroy();
    listener.close();
  });
  return { server, client };
}

/** Its close (events.once would reject at the reset's 'error', which the gate ignores). */
const closed = (s: Socket) => new Promise((r) => s.once("close", r));

test("handshake gate - beyond the limit connections wait, and go in order as handshakes end", async (t) => {
  const { server } = await connections(t, 4);
  const handed: Socket[] = [];
  const gate = new HandshakeGate(2, 60_000);
  gate.bind((s) => handed.push(s));
  for (const s of server) gate.admit(s);
  t.deepEqual(handed, server.slice(0, 2));
  t.is(gate.inProgress, 2);
  t.is(gate.waiting, 2);
  // The first one's agent is welcomed: the third goes.
  gate.done(peerOf(server[0]!)!);
  t.deepEqual(handed, server.slice(0, 3));
  // A done() for a peer not in progress (or told twice) frees nothing more.
  gate.done(peerOf(server[0]!)!);
  gate.done("127.0.0.1:1");
  t.is(handed.length, 3);
  gate.done(peerOf(server[1]!)!);
  t.deepEqual(handed, server);
  t.is(gate.waiting, 0);
});

test("handshake gate - a connection that closes gives its slot back, and one that closed while waiting is skipped", async (t) => {
  const { server, client } = await connections(t, 3);
  const handed: Socket[] = [];
  const gate = new HandshakeGate(1, 60_000);
  gate.bind((s) => handed.push(s));
  for (const s of server) gate.admit(s);
  t.deepEqual(handed, [server[0]]);
  // The second gives up while it waits (an agent at its Welcome timeout): its reset is no error.
  client[1]!.resetAndDestroy();
  await closed(server[1]!);
  // The first's connection closes before any Welcome: the next live one goes, not the closed one.
  client[0]!.destroy();
  await closed(server[0]!);
  t.deepEqual(handed, [server[0], server[2]]);
  t.is(gate.inProgress, 1);
});

test("handshake gate - a slot is given back after slotMs at the latest (a connection that never makes an agent's stream)", async (t) => {
  const { server } = await connections(t, 2);
  const handed: Socket[] = [];
  const gate = new HandshakeGate(1, 50);
  gate.bind((s) => handed.push(s));
  gate.admit(server[0]!);
  gate.admit(server[1]!);
  t.is(handed.length, 1);
  const deadline = Date.now() + 10_000;
  while (handed.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  t.deepEqual(handed, server);
});

test("handshake gate - once the oldest has waited newestFirstAfterMs, the newest go first", async (t) => {
  const { server } = await connections(t, 4);
  const handed: Socket[] = [];
  // 0: every queue is old enough (the default, 2 s, is the in-order test above).
  const gate = new HandshakeGate(1, 60_000, 0);
  gate.bind((s) => handed.push(s));
  for (const s of server) gate.admit(s);
  t.deepEqual(handed, [server[0]]);
  gate.done(peerOf(server[0]!)!);
  gate.done(peerOf(server[3]!)!);
  gate.done(peerOf(server[2]!)!);
  t.deepEqual(handed, [server[0], server[3], server[2], server[1]]);
  t.is(gate.waiting, 0);
});

test("handshake gate - a peer that ends its connection while it waits (an agent giving up: a FIN, no reset) is closed, skipped and counted", async (t) => {
  const { server, client } = await connections(t, 3);
  const handed: Socket[] = [];
  const gate = new HandshakeGate(1, 60_000);
  gate.bind((s) => handed.push(s));
  for (const s of server) gate.admit(s);
  // Its first bytes, then its end: both unread by anyone but the gate.
  client[1]!.end("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  await closed(server[1]!);
  t.is(gate.abandoned, 1);
  gate.done(peerOf(server[0]!)!);
  t.deepEqual(handed, [server[0], server[2]]);
  t.is(gate.abandoned, 1, "a connection handed over is not counted when it closes later");
  client[2]!.destroy();
  await closed(server[2]!);
  t.is(gate.abandoned, 1);
});

test("handshake gate - the bytes a connection sent while it waited are handed over unread, in order, and what follows flows", async (t) => {
  const { server, client } = await connections(t, 2);
  const handed: Socket[] = [];
  const gate = new HandshakeGate(1, 60_000);
  gate.bind((s) => handed.push(s));
  gate.admit(server[0]!);
  // The second's first bytes arrive (the listener admits on them), then more while it waits.
  client[1]!.write("first ");
  await once(server[1]!, "readable");
  gate.admit(server[1]!);
  client[1]!.write("second ");
  const deadline = Date.now() + 10_000;
  while (server[1]!.bytesRead < "first second ".length && Date.now() < deadline) {
    await new Promise((r) => setImmediate(r));
  }
  t.is(server[1]!.bytesRead, "first second ".length);
  t.is(server[1]!.readableLength, 0, "the gate reads what comes while a connection waits");
  gate.done(peerOf(server[0]!)!);
  t.deepEqual(handed, server);
  const received: Buffer[] = [];
  server[1]!.on("data", (chunk: Buffer) => received.push(chunk));
  client[1]!.end("third");
  await once(server[1]!, "end");
  t.is(Buffer.concat(received).toString(), "first second third");
});

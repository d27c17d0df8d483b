import { once } from "node:events";
import { connect as h2connect } from "node:http2";
import { type Socket, connect, createServer } from "node:net";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import test from "ava";
import { handOverOnFirstBytes, listenForGrpc } from "./listener.js";
import { freePort, listenOnFreePort } from "@relayctl/devkit";

/** A TCP server whose connections go through handOverOnFirstBytes; `handed` gets what is handed. */
async function firstBytesServer(timeoutMs?: number) {
  const handed: Socket[] = [];
  const accepted: Socket[] = [];
  const server = createServer((socket) => {
    accepted.push(socket);
    handOverOnFirstBytes(socket, (s) => handed.push(s), timeoutMs);
  });
  const port = await listenOnFreePort(server);
  return { server, port, handed, accepted };
}

test("listener - a connection is handed over with its first bytes still to read", async (t) => {
  const s = await firstBytesServer();
  t.teardown(() => s.server.close());
  const client = connect(s.port, "127.0.0.1");
  t.teardown(() => client.destroy());
  client.write("PRI * HTTP/2.0");
  while (s.handed.length === 0) await tick();
  const socket = s.handed[0]!;
  let got = "";
  for (;;) {
    const chunk = socket.read();
    if (chunk) got += chunk;
    if (got.length >= 14) break;
    await once(socket, "readable");
  }
  t.is(got, "PRI * HTTP/2.0");
});

test("listener - a connection closed before its first byte is never handed over", async (t) => {
  const s = await firstBytesServer();
  t.teardown(() => s.server.close());
  const client = connect(s.port, "127.0.0.1");
  await once(client, "connect");
  client.end();
  while (s.accepted.length === 0) await tick();
  await once(s.accepted[0]!, "close");
  t.is(s.handed.length, 0);
});

test("listener - a connection that says nothing is closed at the timeout, never handed over", async (t) => {
  const s = await firstBytesServer(100);
  t.teardown(() => s.server.close());
  const client = connect(s.port, "127.0.0.1");
  client.on("error", () => {});
  await once(client, "close");
  t.is(s.handed.length, 0);
});

test("listener - grpc-js serves through it with no dynamic header table (SETTINGS_HEADER_TABLE_SIZE 0)", async (t) => {
  const server = new Server();
  const { listener, port } = await listenForGrpc(server, ServerCredentials.createInsecure(), {
    host: "127.0.0.1",
    port: await freePort(),
  });
  t.teardown(() => {
    listener.close();
    server.forceShutdown();
  });
  const session = h2connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.destroy());
  const [settings] = await once(session, "remoteSettings");
  t.is(settings.headerTableSize, 0);
  // A whole call went through the handover: grpc-js answered an unknown method with its status
  // (trailers only, so in the response's headers).
  const req = session.request({
    ":method": "POST",
    ":path": "/relayctl.Nothing/Here",
    "content-type": "application/grpc",
    te: "trailers",
  });
  req.end();
  req.resume();
  const [headers] = await once(req, "response");
  t.is(headers["grpc-status"], "12"); // UNIMPLEMENTED
});

const tick = () => new Promise((r) => setImmediate(r));

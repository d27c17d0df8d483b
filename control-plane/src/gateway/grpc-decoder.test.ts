import { once } from "node:events";
import { readFileSync } from "node:fs";
import { connect as h2connect } from "node:http2";
import { dirname } from "node:path";
import { gzipSync } from "node:zlib";
import { Client, Server, ServerCredentials, type ServerDuplexStream, credentials } from "@grpc/grpc-js";
import test from "ava";
import {
  BaseServerInterceptingCall,
  StreamDecoder,
  deliverAwaitedMessagesAtOnce,
  deliveredAtOnce,
  releaseDecodedBytes,
} from "./grpc-decoder.js";
import { listenForGrpc } from "./listener.js";
import { freePort } from "@relayctl/devkit";

/** gRPC's framing: a compress flag byte, a 4-byte length, the message. */
function frame(body: string): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.write(body, 5);
  return out;
}

test("grpc decoder - once a message is decoded, the decoder holds none of the bytes it came in", (t) => {
  releaseDecodedBytes();
  const decoder = new StreamDecoder(-1);
  // A socket read with the message in it, as Node's HTTP/2 hands it over (a slice of a bigger read).
  const read = Buffer.concat([Buffer.from("xx"), frame("heartbeat"), Buffer.from("yy")]);
  const chunk = read.subarray(2, read.length - 2);
  const messages = decoder.write(chunk);
  t.deepEqual(messages, [frame("heartbeat")]);
  t.not(decoder.readCompressFlag.buffer, read.buffer);
  t.is(decoder.readPartialMessage.length, 0);
});

test("grpc decoder - messages split anywhere across writes still come out whole, in order", (t) => {
  releaseDecodedBytes();
  const decoder = new StreamDecoder(-1);
  const frames = [frame("a"), frame(""), frame("hello world"), frame("z".repeat(300))];
  const all = Buffer.concat(frames);
  const out: Buffer[] = [];
  for (let i = 0; i < all.length; i += 7) out.push(...decoder.write(all.subarray(i, i + 7)));
  t.deepEqual(out, frames);
});

test("grpc decoder - grpc-js's server decodes with the class that is patched", (t) => {
  // server-interceptors.js requires "./stream-decoder": the same file, so the same loaded module.
  const interceptors = require.resolve("@grpc/grpc-js/build/src/server-interceptors");
  const decoder = require.resolve("@grpc/grpc-js/build/src/stream-decoder");
  t.is(dirname(decoder), dirname(interceptors));
  t.true(readFileSync(interceptors, "utf8").includes('require("./stream-decoder")'));
  t.is(require(decoder).StreamDecoder, StreamDecoder);
});

// --- grpc-js's server call given an awaited message at once (deliverAwaitedMessagesAtOnce) ---

/** A server call as grpc-js's BaseServerInterceptingCall has it, its effects recorded. */
function fakeCall(state: { isReadPending: boolean; listener: boolean; queued?: number }) {
  const delivered: string[] = [];
  const queued: string[] = [];
  const statuses: number[] = [];
  let pauses = 0;
  const call = {
    stream: {
      pause: () => {
        pauses++;
      },
    },
    handler: { deserialize: (b: Buffer) => b.toString() },
    listener: state.listener ? { onReceiveMessage: (m: unknown) => delivered.push(String(m)) } : null,
    decoder: new StreamDecoder(-1),
    readQueue: Array.from({ length: state.queued ?? 0 }, () => ({
      type: "COMPRESSED" as const,
      compressedMessage: frame("before"),
      parsedMessage: null,
    })),
    isReadPending: state.isReadPending,
    checkCancelled: () => false,
    sendStatus: (s: { code: number }) => statuses.push(s.code),
    decompressAndMaybePush: async (e: { compressedMessage: Buffer | null }) => {
      queued.push(e.compressedMessage!.subarray(5).toString());
    },
    handleDataFrame: BaseServerInterceptingCall.prototype.handleDataFrame,
  };
  return { call, delivered, queued, statuses, pauses: () => pauses };
}

test("grpc server call - a message the call awaits is delivered at once, the next waits for the call's read", (t) => {
  deliverAwaitedMessagesAtOnce();
  const f = fakeCall({ isReadPending: true, listener: true });
  f.call.handleDataFrame(Buffer.concat([frame("first"), frame("second")]));
  t.deepEqual(f.delivered, ["first"]);
  t.false(f.call.isReadPending);
  // The second came before the call asked again: grpc-js's way, the HTTP/2 stream paused.
  t.deepEqual(f.queued, ["second"]);
  t.is(f.pauses(), 1);
  t.is(f.call.readQueue.length, 1);
});

test("grpc server call - a message behind a queued one is queued, never passes it", (t) => {
  deliverAwaitedMessagesAtOnce();
  const f = fakeCall({ isReadPending: true, listener: true, queued: 1 });
  f.call.handleDataFrame(frame("after"));
  t.deepEqual(f.delivered, []);
  t.deepEqual(f.queued, ["after"]);
  t.is(f.call.readQueue.length, 2);
});

test("grpc server call - a compressed message is decompressed the way grpc-js does, never delivered raw", (t) => {
  deliverAwaitedMessagesAtOnce();
  const f = fakeCall({ isReadPending: true, listener: true });
  const compressed = frame("gz");
  compressed[0] = 1;
  f.call.handleDataFrame(compressed);
  t.deepEqual(f.delivered, []);
  t.deepEqual(f.queued, ["gz"]);
});

test("grpc server call - a message the call has not asked for is queued and the stream paused (backpressure)", (t) => {
  deliverAwaitedMessagesAtOnce();
  for (const state of [
    { isReadPending: false, listener: true },
    { isReadPending: true, listener: false },
  ]) {
    const f = fakeCall(state);
    f.call.handleDataFrame(frame("m"));
    t.deepEqual(f.delivered, []);
    t.deepEqual(f.queued, ["m"]);
    t.is(f.pauses(), 1);
  }
});

test("grpc server call - an undecodable message ends the call with INTERNAL, as grpc-js answers it", (t) => {
  deliverAwaitedMessagesAtOnce();
  const f = fakeCall({ isReadPending: true, listener: true });
  f.call.handler.deserialize = () => {
    throw new Error("bad");
  };
  f.call.handleDataFrame(Buffer.concat([frame("x"), frame("y")]));
  t.deepEqual(f.delivered, []);
  t.deepEqual(f.statuses, [13]);
});

test("grpc server call - the patched method is a copy of grpc-js 1.14's handleDataFrame", (t) => {
  // The patch replaces the method with the same steps plus the direct way: an upgrade that changes
  // grpc-js's method (or moves the class) must be looked at again.
  const file = require.resolve("@grpc/grpc-js/build/src/server-interceptors");
  const source = readFileSync(file, "utf8");
  const start = source.indexOf("    handleDataFrame(data) {");
  const end = source.indexOf("\n    handleEndEvent() {", start);
  t.true(start > 0 && end > start);
  const body = source.slice(start, end).replace(/\s+/g, " ").trim();
  t.is(
    body,
    "handleDataFrame(data) { var _a; if (this.checkCancelled()) { return; } trace('Request to ' + this.handler.path + ' received data frame of size ' + data.length); let rawMessages; try { rawMessages = this.decoder.write(data); } catch (e) { this.sendStatus({ code: constants_1.Status.RESOURCE_EXHAUSTED, details: e.message }); return; } for (const messageBytes of rawMessages) { this.stream.pause(); const queueEntry = { type: 'COMPRESSED', compressedMessage: messageBytes, parsedMessage: null, }; this.readQueue.push(queueEntry); this.decompressAndMaybePush(queueEntry); (_a = this.callEventTracker) === null || _a === void 0 ? void 0 : _a.addMessageReceived(); } }",
  );
  for (const field of ["this.isReadPending = false;", "this.listener = listener;", "this.readQueue = [];"])
    t.true(source.includes(field), field);
});

/** A bidi method of raw strings (no protobuf), served by grpc-js through listenForGrpc. */
async function echoServer(onCall: (call: ServerDuplexStream<string, string>) => void) {
  const server = new Server();
  server.addService(
    {
      chat: {
        path: "/relayctl.test.Echo/Chat",
        requestStream: true,
        responseStream: true,
        requestSerialize: (s: string) => Buffer.from(s),
        requestDeserialize: (b: Buffer) => b.toString(),
        responseSerialize: (s: string) => Buffer.from(s),
        responseDeserialize: (b: Buffer) => b.toString(),
      },
    },
    { chat: onCall },
  );
  const { listener, port } = await listenForGrpc(server, ServerCredentials.createInsecure(), {
    host: "127.0.0.1",
    port: await freePort(),
  });
  return {
    port,
    close: () => {
      listener.close();
      server.forceShutdown();
    },
  };
}

test("grpc server call - through grpc-js, messages arrive whole and in order, most of them at once", async (t) => {
  const got: string[] = [];
  const s = await echoServer((call) => {
    call.on("data", (m: string) => {
      got.push(m);
      if (got.length === 300) call.end();
    });
  });
  t.teardown(s.close);
  const before = deliveredAtOnce.count;
  const client = new Client(`127.0.0.1:${s.port}`, credentials.createInsecure());
  t.teardown(() => client.close());
  const call = client.makeBidiStreamRequest(
    "/relayctl.test.Echo/Chat",
    (s: string) => Buffer.from(s),
    (b: Buffer) => b.toString(),
  );
  call.on("data", () => {});
  const sent = Array.from({ length: 300 }, (_, i) => `m${i}`);
  // Some one at a time (each awaited by the server's call), some in bursts (queued behind).
  for (const [i, m] of sent.entries()) {
    call.write(m);
    if (i % 50 === 0) while (got.length <= i) await new Promise((r) => setImmediate(r));
  }
  await new Promise<void>((resolve, reject) => {
    call.on("status", () => resolve());
    call.on("error", reject);
  });
  t.deepEqual(got, sent);
  t.true(deliveredAtOnce.count - before >= 6, "the awaited ones took the direct way");
});

test("grpc server call - through grpc-js, a compressed message and an uncompressed one after it keep their order", async (t) => {
  const got: string[] = [];
  const s = await echoServer((call) => {
    call.on("data", (m: string) => {
      got.push(m);
      if (got.length === 3) call.end();
    });
  });
  t.teardown(s.close);
  const session = h2connect(`http://127.0.0.1:${s.port}`);
  t.teardown(() => session.destroy());
  const req = session.request({
    ":method": "POST",
    ":path": "/relayctl.test.Echo/Chat",
    "content-type": "application/grpc",
    "grpc-encoding": "gzip",
    te: "trailers",
  });
  const gz = (body: string) => {
    const z = gzipSync(body);
    const out = Buffer.alloc(5 + z.length);
    out[0] = 1;
    out.writeUInt32BE(z.length, 1);
    z.copy(out, 5);
    return out;
  };
  const response = once(req, "response");
  const ended = once(req, "end");
  // One write: the three come in one data frame, the gzipped first (decompressed asynchronously).
  req.write(Buffer.concat([gz("one (gzip)"), frame("two"), frame("three")]));
  req.resume();
  const [headers] = await response;
  t.is(headers["grpc-status"], "0");
  await ended;
  t.deepEqual(got, ["one (gzip)", "two", "three"]);
});

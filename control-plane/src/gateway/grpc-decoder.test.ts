import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import test from "ava";
import { StreamDecoder, releaseDecodedBytes } from "./grpc-decoder.js";

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

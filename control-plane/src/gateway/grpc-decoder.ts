// grpc-js's message decoder, made to let go of a message's bytes once the message is out.
//
// Its StreamDecoder (one per call) keeps slices of the last message it read (the compress flag
// and the message's parts) until the next message starts, and a slice holds the whole socket
// read it came from: its ArrayBuffer and the native memory behind it. An agent's stream carries a
// heartbeat every 5 s, so each one's bytes live 5 s: past two scavenges, so V8 promotes them to
// the old generation, where they wait for a full collection, and their native reads pin the
// allocator's heap meanwhile. agent-fanin at 4,000 agents promoted ~370 KB/s in the steady state;
// at 10,000, four minutes of heartbeats grew the gateway's RSS from ~480 to ~600 MiB.
//
// Between messages the decoder reads neither field (the next message's first byte sets both), so
// dropping them then changes nothing it decodes. grpc-js has no option for it: the patch is on
// its class, and grpc-decoder.test.ts fails when an upgrade moves or changes it.
interface StreamDecoderShape {
  readState: number;
  readCompressFlag: Buffer;
  readPartialMessage: Buffer[];
  write(data: Buffer): Buffer[];
}

/** grpc-js's StreamDecoder class (build/src/stream-decoder.js, not a public export). */
export const StreamDecoder: new (maxReadMessageLength: number) => StreamDecoderShape =
  require("@grpc/grpc-js/build/src/stream-decoder").StreamDecoder;

/** ReadState.NO_DATA: between two messages. */
const NO_DATA = 0;
const NO_BYTES: Buffer = Buffer.alloc(1);
const NO_PARTS: Buffer[] = Object.freeze([]) as unknown as Buffer[];
const PATCHED = Symbol.for("relayctl.grpc-decoder.releases");

/** Makes every StreamDecoder drop its last message's bytes once it is decoded (idempotent). */
export function releaseDecodedBytes(): void {
  const proto = StreamDecoder.prototype as StreamDecoderShape & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const write = proto.write;
  proto.write = function (this: StreamDecoderShape, data: Buffer): Buffer[] {
    const messages = write.call(this, data);
    if (this.readState === NO_DATA) {
      this.readCompressFlag = NO_BYTES;
      this.readPartialMessage = NO_PARTS;
    }
    return messages;
  };
  proto[PATCHED] = true;
}

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

// grpc-js's server hands each message to the call on a later microtask, and pauses the HTTP/2
// stream for it until the call asks for the next: per message an async function, a pause (the
// stream's readStop), and a resume on a later tick (readStart, which schedules nghttp2's send).
// An agent's stream carries a heartbeat every 5 s, read as soon as it comes, so at 10,000 agents
// that is 2,000 pauses and resumes a second for messages the call was already waiting for.
//
// Here an uncompressed message is given to the call at once when the call asked for one and none
// is queued before it: it goes where grpc-js's own path would have put it a microtask later, in
// the same order. Any other message (compressed, queued behind another, or arriving when the
// call has not asked: its backpressure) takes grpc-js's path unchanged. The patch is on the class
// (not a public export); grpc-decoder.test.ts fails when an upgrade moves or changes it.
interface QueueEntry {
  type: "COMPRESSED" | "READABLE" | "HALF_CLOSE";
  compressedMessage: Buffer | null;
  parsedMessage: unknown;
}

interface ServerCallShape {
  stream: { pause(): void };
  handler: { deserialize(bytes: Buffer): unknown };
  listener: { onReceiveMessage(message: unknown): void } | null;
  decoder: StreamDecoderShape;
  readQueue: QueueEntry[];
  isReadPending: boolean;
  callEventTracker?: { addMessageReceived(): void };
  checkCancelled(): boolean;
  sendStatus(status: { code: number; details: string }): void;
  decompressAndMaybePush(entry: QueueEntry): Promise<void>;
  handleDataFrame(data: Buffer): void;
}

/** grpc-js's BaseServerInterceptingCall (build/src/server-interceptors.js, not a public export). */
export const BaseServerInterceptingCall: { prototype: ServerCallShape } =
  require("@grpc/grpc-js/build/src/server-interceptors").BaseServerInterceptingCall;

const GRPC_ENV: {
  GRPC_NODE_DEBUG_SEND_ERROR_DETAILS: boolean;
} = require("@grpc/grpc-js/build/src/environment");
const DELIVERS_AT_ONCE = Symbol.for("relayctl.grpc-server-call.delivers-at-once");
/** grpc-js's status codes used here (Status.RESOURCE_EXHAUSTED, Status.INTERNAL). */
const RESOURCE_EXHAUSTED = 8;
const INTERNAL = 13;

/** How many messages took the direct way (grpc-decoder.test.ts reads it). */
export const deliveredAtOnce = { count: 0 };

/**
 * Makes grpc-js's server calls take a message the call is waiting for at once (idempotent): the
 * same handleDataFrame as grpc-js 1.14's, with the direct way first.
 */
export function deliverAwaitedMessagesAtOnce(): void {
  const proto = BaseServerInterceptingCall.prototype as ServerCallShape & { [DELIVERS_AT_ONCE]?: true };
  if (proto[DELIVERS_AT_ONCE]) return;
  proto.handleDataFrame = function (this: ServerCallShape, data: Buffer): void {
    if (this.checkCancelled()) return;
    let messages: Buffer[];
    try {
      messages = this.decoder.write(data);
    } catch (e) {
      this.sendStatus({ code: RESOURCE_EXHAUSTED, details: (e as Error).message });
      return;
    }
    for (const bytes of messages) {
      // grpc-js reads a flag of 1 as compressed, anything else as not.
      if (bytes[0] !== 1 && this.isReadPending && this.listener && this.readQueue.length === 0) {
        let message: unknown;
        try {
          message = this.handler.deserialize(bytes.subarray(5));
        } catch (err) {
          // As grpc-js answers it.
          const details = GRPC_ENV.GRPC_NODE_DEBUG_SEND_ERROR_DETAILS
            ? `Error deserializing request: ${(err as Error).message}`
            : "Error deserializing request";
          this.sendStatus({ code: INTERNAL, details });
          return;
        }
        this.isReadPending = false;
        this.callEventTracker?.addMessageReceived();
        deliveredAtOnce.count++;
        this.listener.onReceiveMessage(message);
        continue;
      }
      // grpc-js's own way.
      this.stream.pause();
      const entry: QueueEntry = { type: "COMPRESSED", compressedMessage: bytes, parsedMessage: null };
      this.readQueue.push(entry);
      void this.decompressAndMaybePush(entry);
      this.callEventTracker?.addMessageReceived();
    }
  };
  proto[DELIVERS_AT_ONCE] = true;
}

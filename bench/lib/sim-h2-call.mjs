// The agent's Connect stream (relayctl.agent.v1.AgentGateway/Connect) over node:http2 alone, for
// simulated agents that stand in for thousands of machines on this one. What reaches the gateway is
// what the real agent's grpc-js client sends: an HTTP/2 connection of its own with grpc-js's session
// settings, the same request headers (grpc-js's user agent and accept-encodings, the bearer
// credential), length-prefixed uncompressed protobuf messages both ways, and an HTTP/2 PING every
// `grpc.keepalive_time_ms` with `grpc.keepalive_timeout_ms` for its answer (CHANNEL_OPTIONS). What it
// leaves out is grpc-js's client machinery (channel, resolver, subchannel, picker, call filters):
// through a reconnect storm that cost more CPU per dial than the gateway spends on the agent, on the
// same two cores, so the bench measured its load generator (bench/README.md, agent-fanin).
//
// Written here, not taken from a library: the gRPC clients for Node are grpc-js (what this replaces)
// and Connect's, which brings a runtime of its own; this is a one-method stream of ~100 lines.
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import { createRequire } from "node:module";
import { AgentGatewayService, AgentMessage, GatewayMessage } from "@relayctl/proto";

const require = createRequire(import.meta.url);
const GRPC_JS_VERSION = JSON.parse(
  readFileSync(require.resolve("@grpc/grpc-js/package.json"), "utf8"),
).version;
const PATH = AgentGatewayService.connect.path;

/**
 * One Connect stream on a connection of its own, shaped as grpc-js's ClientDuplexStream is used by
 * SimAgent: write(message), cancel(), and 'data' (a GatewayMessage), 'error', 'end', 'close'.
 */
export class H2ConnectCall extends EventEmitter {
  /**
   * `address` is host:port; `options` the agent's CHANNEL_OPTIONS (keepalive time and timeout).
   */
  constructor(address, credential, options) {
    super();
    this.ended = false;
    this.pending = Buffer.alloc(0);
    this.session = http2.connect(`http://${address}`, {
      // grpc-js's session options (transport.js): its window, no header-block or memory limit.
      settings: { initialWindowSize: http2.getDefaultSettings().initialWindowSize ?? 65535 },
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    this.session.on("error", (err) => this.#fail(err));
    this.session.on("goaway", () => this.#fail(new Error("gateway sent GOAWAY")));
    this.session.on("close", () => this.#finish());
    this.stream = this.session.request({
      ":method": "POST",
      ":path": PATH,
      ":authority": address,
      ":scheme": "http",
      "content-type": "application/grpc",
      te: "trailers",
      "user-agent": `grpc-node-js/${GRPC_JS_VERSION}`,
      "grpc-accept-encoding": "identity,deflate,gzip",
      "accept-encoding": "identity",
      authorization: `Bearer ${credential}`,
    });
    this.stream.on("data", (chunk) => this.#read(chunk));
    this.stream.on("trailers", (t) => {
      const status = Number(t["grpc-status"] ?? 0);
      if (status !== 0)
        this.#fail(Object.assign(new Error(String(t["grpc-message"] ?? "")), { code: status }));
    });
    this.stream.on("error", (err) => this.#fail(err));
    this.stream.on("close", () => this.#finish());
    const every = options["grpc.keepalive_time_ms"];
    const timeout = options["grpc.keepalive_timeout_ms"];
    if (every > 0) {
      this.keepalive = setInterval(() => {
        const timer = setTimeout(() => this.#fail(new Error("keepalive ping not answered")), timeout);
        timer.unref();
        try {
          this.session.ping((err) => {
            clearTimeout(timer);
            if (err) this.#fail(err);
          });
        } catch (err) {
          clearTimeout(timer);
          this.#fail(err);
        }
      }, every);
      this.keepalive.unref();
    }
  }

  write(message) {
    if (this.ended) return false;
    const body = AgentMessage.encode(message).finish();
    const frame = Buffer.allocUnsafe(5 + body.length);
    frame[0] = 0; // not compressed
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    return this.stream.write(frame);
  }

  cancel() {
    this.#finish();
  }

  /** Messages are 5-byte-prefixed (flag, big-endian length); a chunk may hold parts of several. */
  #read(chunk) {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (buf.length >= 5) {
      const length = buf.readUInt32BE(1);
      if (buf.length < 5 + length) break;
      if (buf[0] !== 0) {
        this.#fail(new Error("compressed message from the gateway: not negotiated"));
        return;
      }
      const message = GatewayMessage.decode(buf.subarray(5, 5 + length));
      buf = buf.subarray(5 + length);
      if (!this.ended) this.emit("data", message);
    }
    this.pending = buf.length ? Buffer.from(buf) : Buffer.alloc(0);
  }

  #fail(err) {
    if (this.ended) return;
    this.emit("error", err);
    this.#finish();
  }

  #finish() {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.keepalive);
    if (!this.stream.destroyed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
    if (!this.session.destroyed) this.session.destroy();
    this.emit("end");
    this.emit("close");
  }
}

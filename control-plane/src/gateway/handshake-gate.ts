// How many agents' handshakes a gateway works on at once. After a restart the whole fleet dials
// within a second or two; taking every connection at once floods the event loop with sessions,
// credential hashes and stream setups, and the database batches that end a handshake (its
// credential, its Hello, then its Welcome) wait behind them all. On a slow 2-core machine with
// 10,000 agents dialling at once (agent-fanin, BENCH_SIM_CLIENT=h2) nobody was welcomed for
// 13.75 s after the gateway listened, and 1,254 agents gave up at their Welcome timeout (15 s) and
// dialled again: handshakes paid for twice, the start of a congestion collapse. So connections
// beyond the limit wait, each with the bytes it sent, and go in order as handshakes end.
import type { Socket } from "node:net";

/** Handshakes at once: about two of the connect batches' worth (agent-stream.ts). */
export const MAX_HANDSHAKES = 1000;

/**
 * A handshake's slot is given back when its agent is welcomed (done()), when its connection
 * closes, or after this long at the latest: a connection that never makes an agent's stream (a
 * gRPC health check held open by a load balancer) does not keep a slot.
 */
export const HANDSHAKE_SLOT_MS = 10_000;

/** The key a connection and its gRPC call share: grpc-js's getPeer() of a call on it. */
export function peerOf(socket: Socket): string | undefined {
  if (!socket.remoteAddress) return undefined;
  return socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : socket.remoteAddress;
}

const ignore = (): void => {};

export class HandshakeGate {
  readonly #inProgress = new Map<string, { socket: Socket; timer: NodeJS.Timeout }>();
  #waiting: Socket[] = [];
  #head = 0;

  /** Where an admitted connection goes (listener.ts: grpc-js's connection injector). */
  #handOver: (socket: Socket) => void = (socket) => socket.destroy();

  constructor(
    private readonly limit = MAX_HANDSHAKES,
    private readonly slotMs = HANDSHAKE_SLOT_MS,
  ) {}

  bind(handOver: (socket: Socket) => void): void {
    this.#handOver = handOver;
  }

  /** Connections whose handshake is under way. */
  get inProgress(): number {
    return this.#inProgress.size;
  }

  /** Connections waiting for a slot. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** A connection that sent its first bytes: handed over now, or when a slot is free. */
  admit(socket: Socket): void {
    if (this.#inProgress.size < this.limit && this.waiting === 0) {
      this.#start(socket);
      return;
    }
    // Reset while it waits: it only closes (and is skipped when its turn comes).
    socket.on("error", ignore);
    this.#waiting.push(socket);
  }

  /** The handshake on the connection of this peer (grpc-js's call.getPeer()) is over. */
  done(peer: string, socket?: Socket): void {
    const held = this.#inProgress.get(peer);
    if (!held || (socket !== undefined && held.socket !== socket)) return;
    clearTimeout(held.timer);
    this.#inProgress.delete(peer);
    this.#next();
  }

  #start(socket: Socket): void {
    socket.off("error", ignore);
    const peer = peerOf(socket);
    if (peer !== undefined && !this.#inProgress.has(peer)) {
      const timer = setTimeout(() => this.done(peer, socket), this.slotMs);
      timer.unref();
      this.#inProgress.set(peer, { socket, timer });
      socket.once("close", () => this.done(peer, socket));
    }
    this.#handOver(socket);
  }

  #next(): void {
    while (this.#inProgress.size < this.limit && this.waiting > 0) {
      const socket = this.#waiting[this.#head++]!;
      if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
        this.#waiting = this.#waiting.slice(this.#head);
        this.#head = 0;
      }
      if (socket.destroyed) continue;
      this.#start(socket);
    }
  }
}

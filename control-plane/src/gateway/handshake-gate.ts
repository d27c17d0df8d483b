// How many agents' handshakes a gateway works on at once. After a restart the whole fleet dials
// within a second or two; taking every connection at once floods the event loop with sessions,
// credential hashes and stream setups, and the database batches that end a handshake (its
// credential, its Hello, then its Welcome) wait behind them all. On a slow 2-core machine with
// 10,000 agents dialling at once (agent-fanin, BENCH_SIM_CLIENT=h2) nobody was welcomed for
// 13.75 s after the gateway listened, and 1,254 agents gave up at their Welcome timeout (15 s) and
// dialled again: handshakes paid for twice, the start of a congestion collapse. So connections
// beyond the limit wait, each with the bytes it sent, and go as handshakes end.
//
// In which order: the oldest first while the queue is short. Once the oldest has waited
// NEWEST_FIRST_AFTER_MS, the newest first ("adaptive LIFO"): a gateway that cannot keep up would
// otherwise spend itself on the agents closest to their Welcome timeout, whose handshakes it
// finishes after they gave up, while the ones with time left wait until they too are about to
// give up. Served newest first, the old ones give up while they wait, which costs the gateway
// nothing, and dial again at the top.
import type { Socket } from "node:net";

/** Handshakes at once: about two of the connect batches' worth (agent-stream.ts). */
export const MAX_HANDSHAKES = 1000;

/**
 * A handshake's slot is given back when its agent is welcomed (done()), when its connection
 * closes, or after this long at the latest: a connection that never makes an agent's stream (a
 * gRPC health check held open by a load balancer) does not keep a slot.
 */
export const HANDSHAKE_SLOT_MS = 10_000;

/**
 * Once the oldest waiting connection has waited this long, the newest go first. An agent gives up
 * 15 s after it dialled (agent-connection.ts, WELCOME_TIMEOUT_MS), and a handshake under a storm
 * takes a few seconds once started: a queue that holds nobody this long is served in order and
 * loses nobody; past it, the oldest cannot be welcomed in time. At 2 s the oldest were left to
 * give up where in order they would have been welcomed (agent-fanin with a fleet that closes its
 * connection when it gives up, as the agent does: 34.3 and 38.5 s back against 30.1 and 23.1 in
 * order).
 */
export const NEWEST_FIRST_AFTER_MS = 10_000;

/** The key a connection and its gRPC call share: grpc-js's getPeer() of a call on it. */
export function peerOf(socket: Socket): string | undefined {
  if (!socket.remoteAddress) return undefined;
  return socket.remotePort ? `${socket.remoteAddress}:${socket.remotePort}` : socket.remoteAddress;
}

const ignore = (): void => {};

/**
 * A connection waiting for a slot. Its bytes are read as they come, so that its peer's close (an
 * agent at its Welcome timeout closes with a FIN, not a reset) is seen while it waits: unread
 * bytes hold the stream's end back, and a connection handed over with its end unseen costs an
 * HTTP/2 session and the whole handshake for an agent that is gone.
 */
class Waiter {
  readonly since = performance.now();
  #chunks: Buffer[] = [];

  constructor(
    readonly socket: Socket,
    readonly onAbandoned: () => void,
  ) {
    socket.on("error", ignore); // reset while it waits: it only closes
    socket.on("readable", this.#read);
    socket.on("end", this.#end);
    socket.on("close", onAbandoned);
    this.#read();
  }

  readonly #read = (): void => {
    for (let chunk = this.socket.read(); chunk !== null; chunk = this.socket.read()) this.#chunks.push(chunk);
  };

  readonly #end = (): void => {
    this.socket.destroy();
  };

  /** The socket as it came, its bytes unread again, for whoever takes it now. */
  release(): Socket {
    const { socket } = this;
    socket.off("error", ignore);
    socket.off("readable", this.#read);
    socket.off("end", this.#end);
    socket.off("close", this.onAbandoned);
    if (this.#chunks.length > 0) socket.unshift(Buffer.concat(this.#chunks));
    this.#chunks = [];
    return socket;
  }
}

export class HandshakeGate {
  readonly #inProgress = new Map<string, { socket: Socket; timer: NodeJS.Timeout }>();
  #waiting: Waiter[] = [];
  #head = 0;
  #abandoned = 0;

  /** Where an admitted connection goes (listener.ts: grpc-js's connection injector). */
  #handOver: (socket: Socket) => void = (socket) => socket.destroy();

  constructor(
    private readonly limit = MAX_HANDSHAKES,
    private readonly slotMs = HANDSHAKE_SLOT_MS,
    private readonly newestFirstAfterMs = NEWEST_FIRST_AFTER_MS,
  ) {}

  bind(handOver: (socket: Socket) => void): void {
    this.#handOver = handOver;
  }

  /** Connections whose handshake is under way. */
  get inProgress(): number {
    return this.#inProgress.size;
  }

  /** Connections waiting for a slot (some of them may have closed since, and are skipped). */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /** Connections whose peer closed while they waited for a slot, since the gateway started. */
  get abandoned(): number {
    return this.#abandoned;
  }

  readonly #countAbandoned = (): void => {
    this.#abandoned++;
  };

  /** A connection that sent its first bytes: handed over now, or when a slot is free. */
  admit(socket: Socket): void {
    if (this.#inProgress.size < this.limit && this.waiting === 0) {
      this.#start(socket);
      return;
    }
    this.#waiting.push(new Waiter(socket, this.#countAbandoned));
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
    while (this.#inProgress.size < this.limit && this.#dropClosedAtHead()) {
      const newestFirst = performance.now() - this.#waiting[this.#head]!.since >= this.newestFirstAfterMs;
      const waiter = newestFirst ? this.#waiting.pop()! : this.#waiting[this.#head++]!;
      this.#compact();
      if (waiter.socket.destroyed) continue;
      this.#start(waiter.release());
    }
  }

  /** Whether a connection that is still open waits, with the closed ones before it let go. */
  #dropClosedAtHead(): boolean {
    while (this.waiting > 0 && this.#waiting[this.#head]!.socket.destroyed) this.#head++;
    this.#compact();
    return this.waiting > 0;
  }

  #compact(): void {
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
  }
}

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
// nothing, and dial again at the top. A fleet that dialled all at once is one age, though: there
// the gateway closes, instead of starting, a connection that has waited so long that its agent
// will give up before a handshake (as long as they take now) could end (HOPELESS_AFTER_MS).
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
 * takes 1-2 s once admitted: a short queue is served in order, a long one cannot be in time.
 */
export const NEWEST_FIRST_AFTER_MS = 2_000;

/**
 * A waiting connection whose wait plus a handshake's time (an average of the last ones) comes to
 * more than this is closed, not started: its agent gives up 15 s after it dialled
 * (agent-connection.ts, WELCOME_TIMEOUT_MS; a connection's first bytes come right after its dial),
 * and a handshake it gives up on cost the gateway all its work for nothing. Closed, the agent
 * dials again on its schedule (within 2 s in an outage's first 30 s) and comes in at the top.
 */
export const HOPELESS_AFTER_MS = 14_000;

export interface HandshakeGateOptions {
  /** Handshakes at once. @default MAX_HANDSHAKES */
  limit?: number;
  /** @default HANDSHAKE_SLOT_MS */
  slotMs?: number;
  /** @default NEWEST_FIRST_AFTER_MS */
  newestFirstAfterMs?: number;
  /** @default HOPELESS_AFTER_MS */
  hopelessAfterMs?: number;
  /** Milliseconds, monotonic (tests set the time). @default performance.now */
  now?: () => number;
}

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
  #chunks: Buffer[] = [];

  constructor(
    readonly socket: Socket,
    readonly since: number,
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
  readonly #inProgress = new Map<string, { socket: Socket; timer: NodeJS.Timeout; startedAt: number }>();
  #waiting: Waiter[] = [];
  #head = 0;
  #abandoned = 0;
  #tooLate = 0;
  /** How long a handshake takes now, from its start to its Welcome: a moving average. */
  #handshakeMs = 0;
  readonly #limit: number;
  readonly #slotMs: number;
  readonly #newestFirstAfterMs: number;
  readonly #hopelessAfterMs: number;
  readonly #now: () => number;

  /** Where an admitted connection goes (listener.ts: grpc-js's connection injector). */
  #handOver: (socket: Socket) => void = (socket) => socket.destroy();

  constructor(options: HandshakeGateOptions = {}) {
    this.#limit = options.limit ?? MAX_HANDSHAKES;
    this.#slotMs = options.slotMs ?? HANDSHAKE_SLOT_MS;
    this.#newestFirstAfterMs = options.newestFirstAfterMs ?? NEWEST_FIRST_AFTER_MS;
    this.#hopelessAfterMs = options.hopelessAfterMs ?? HOPELESS_AFTER_MS;
    this.#now = options.now ?? (() => performance.now());
  }

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

  /** Connections closed because they waited too long to be welcomed in time (HOPELESS_AFTER_MS). */
  get tooLate(): number {
    return this.#tooLate;
  }

  readonly #countAbandoned = (): void => {
    this.#abandoned++;
  };

  /** A connection that sent its first bytes: handed over now, or when a slot is free. */
  admit(socket: Socket): void {
    if (this.#inProgress.size < this.#limit && this.waiting === 0) {
      this.#start(socket);
      return;
    }
    this.#waiting.push(new Waiter(socket, this.#now(), this.#countAbandoned));
  }

  /** The agent on the connection of this peer (grpc-js's call.getPeer()) was welcomed. */
  done(peer: string): void {
    const held = this.#inProgress.get(peer);
    if (!held) return;
    const took = this.#now() - held.startedAt;
    this.#handshakeMs = this.#handshakeMs === 0 ? took : 0.8 * this.#handshakeMs + 0.2 * took;
    this.#free(peer, held.socket);
  }

  /** Its slot back: the handshake ended (welcomed, its connection closed, or at slotMs). */
  #free(peer: string, socket: Socket): void {
    const held = this.#inProgress.get(peer);
    if (!held || held.socket !== socket) return;
    clearTimeout(held.timer);
    this.#inProgress.delete(peer);
    this.#next();
  }

  #start(socket: Socket): void {
    const peer = peerOf(socket);
    if (peer !== undefined && !this.#inProgress.has(peer)) {
      const timer = setTimeout(() => this.#free(peer, socket), this.#slotMs);
      timer.unref();
      this.#inProgress.set(peer, { socket, timer, startedAt: this.#now() });
      socket.once("close", () => this.#free(peer, socket));
    }
    this.#handOver(socket);
  }

  #next(): void {
    while (this.#inProgress.size < this.#limit && this.#dropAtHead()) {
      const newestFirst = this.#now() - this.#waiting[this.#head]!.since >= this.#newestFirstAfterMs;
      const waiter = newestFirst ? this.#waiting.pop()! : this.#waiting[this.#head++]!;
      this.#compact();
      if (waiter.socket.destroyed) continue;
      this.#start(waiter.release());
    }
  }

  /**
   * Whether a connection that can still be welcomed in time waits. Before it, oldest first, the
   * closed ones are let go and the hopeless ones closed (all the hopeless are older than any other).
   */
  #dropAtHead(): boolean {
    const tooLateBefore = this.#now() + this.#handshakeMs - this.#hopelessAfterMs;
    while (this.waiting > 0) {
      const oldest = this.#waiting[this.#head]!;
      if (oldest.socket.destroyed) {
        this.#head++;
      } else if (oldest.since < tooLateBefore) {
        this.#head++;
        oldest.release().destroy();
        this.#tooLate++;
      } else break;
    }
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

// The gateway's listening socket and what grpc-js makes of each connection on it. A gateway holds
// every agent's connection for as long as the agent runs (10,000 in agent-fanin), so what one
// connection costs is paid 10,000 times, and after a restart the whole fleet connects at once.
import { type Server as NetServer, type Socket, createServer } from "node:net";
import type { Server, ServerCredentials } from "@grpc/grpc-js";
import { deliverAwaitedMessagesAtOnce, releaseDecodedBytes } from "./grpc-decoder.js";
import { HandshakeGate } from "./handshake-gate.js";

/** The kernel caps it at net.core.somaxconn (4096 by default since Linux 5.4). */
const LISTEN_BACKLOG = 4096;

/**
 * A connection that sends nothing for this long is closed before it costs an HTTP/2 session: as
 * long as grpc-js gave a silent session (its keepalive, 20 s, then 10 s for the answer), so a
 * client slowed down by a loaded machine is held no shorter than before.
 */
export const FIRST_BYTES_TIMEOUT_MS = 30_000;

/**
 * Node HTTP/2 options grpc-js has no channel option for: no dynamic header table on either side.
 * An agent's headers come once, when its stream opens, and a table would keep them (and ours) for
 * the connection's life: nghttp2's memory per session 23.4 KB with the tables, 21.9 without
 * (heap snapshots at 1,500 agents). Each stream's headers are then sent literally, once.
 */
export const HTTP2_OPTIONS = { maxDeflateDynamicTableSize: 0, settings: { headerTableSize: 0 } };

/**
 * Puts HTTP2_OPTIONS into the options grpc-js 1.14 makes its Node HTTP/2 server with (its
 * `commonServerOptions`, read when a port is bound or an injector made: call this before). Not a
 * public option: listener.test.ts fails when a grpc-js upgrade stops it reaching the wire.
 */
export function applyHttp2Options(server: Server): void {
  const internal = server as unknown as { commonServerOptions?: { settings?: object } };
  const options = internal.commonServerOptions;
  if (!options) return;
  Object.assign(options, HTTP2_OPTIONS, { settings: { ...options.settings, ...HTTP2_OPTIONS.settings } });
}

/**
 * Hands a connection to grpc-js once its first bytes came (an HTTP/2 preface or a TLS hello: the
 * client speaks first in both). grpc-js makes an HTTP/2 session for every connection it is given
 * (~25 KB outside V8, ~3 KB in it), and one that closes or says nothing (a TCP health check, a
 * port scan, a client's probe) would have one made and freed for nothing: thousands of them
 * during a restart's reconnect, freed between the sessions that stay, left 28 MB of holes in the
 * allocator's heap at 4,000 agents (malloc_info after the storm; 0.5 MB when handed over on the
 * first bytes). The bytes already read go with the socket: Node's HTTP/2 and TLS read a
 * socket's buffered data first.
 */
export function handOverOnFirstBytes(
  socket: Socket,
  handOver: (socket: Socket) => void,
  timeoutMs = FIRST_BYTES_TIMEOUT_MS,
): void {
  // A plain timer, not the socket's own timeout: that one keeps its Timeout (and listener) on the
  // socket for the connection's life. Nothing here outlives the handover.
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  const ignore = (): void => {};
  socket.on("error", ignore); // reset before its first bytes: it only closes
  socket.once("readable", () => {
    clearTimeout(timer);
    socket.off("error", ignore);
    // Readable with nothing to read: it ended before a byte.
    if (socket.readableLength === 0) socket.destroy();
    else handOver(socket);
  });
}

/**
 * Listens on `listen` with our own socket, not grpc-js's (which listens with Node's default backlog
 * of 511 and takes no other): a restarted gateway meets its whole fleet within a second or two,
 * and a full accept queue drops the SYNs, which the agents' kernels send again only 1, 3, 7 and
 * 15 s later (agent-fanin saw the last agents of 4,000 back 15 s after the rest).
 */
export async function listenForGrpc(
  server: Server,
  creds: ServerCredentials,
  listen: { host: string; port: number },
  /** Admits the connections' handshakes (handshake-gate.ts); one of its own when not given. */
  gate = new HandshakeGate(),
): Promise<{ listener: NetServer; port: number }> {
  applyHttp2Options(server);
  releaseDecodedBytes();
  deliverAwaitedMessagesAtOnce();
  const injector = server.createConnectionInjector(creds);
  gate.bind((s) => injector.injectConnection(s));
  const listener = createServer((socket) => handOverOnFirstBytes(socket, (s) => gate.admit(s)));
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen({ host: listen.host, port: listen.port, backlog: LISTEN_BACKLOG }, () => {
      listener.off("error", reject);
      resolve();
    });
  });
  const address = listener.address();
  return { listener, port: typeof address === "object" && address ? address.port : listen.port };
}

// The gRPC gateway: AgentGateway.Connect for agents, plus the standard health
// service (load balancers) and, when the operator turns it on, server
// reflection (grpcurl and friends).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { loadSync } from "@grpc/proto-loader";
import { ReflectionService } from "@grpc/reflection";
import { AgentGatewayService } from "@relayctl/proto";
import { HealthImplementation } from "grpc-health-check";
import { cleanupDone } from "../applications/cleanup.js";
import { syncSettler } from "../external-deploy/settle.js";
import { observeHandshakes } from "../observability/metrics.js";
import { type GatewayDeps, handleConnect } from "./agent-stream.js";
import { HandshakeGate, MAX_HANDSHAKES } from "./handshake-gate.js";
import { listenForGrpc } from "./listener.js";

export interface GatewayServer {
  url: string;
  close(): Promise<void>;
}

export async function startGateway(
  deps: GatewayDeps,
  listen: { host: string; port: number },
  tls: { certFile: string; keyFile: string } | undefined,
  /** Serve gRPC server reflection (RELAYCTL_GRPC_REFLECTION, off by default). */
  reflection = false,
  /** Agents' handshakes at once (RELAYCTL_GATEWAY_MAX_HANDSHAKES). */
  maxHandshakes = MAX_HANDSHAKES,
): Promise<GatewayServer> {
  // The agents' results are completed here: a cleanup's report ends its pending row.
  deps.ops.onCompletion("cleanup", cleanupDone);
  // ...and an external-deploy sync's entries settled with its route_sync's completion.
  deps.ops.onSettle("route_sync", syncSettler);
  // Whether plaintext is allowed on this address is decided by config (config.ts).
  const server = new Server({
    // An agent that goes without a word is found by its missing heartbeats (registry.ts,
    // closeWhenSilent: 30 s with the default interval). HTTP/2 pings every 20 s per connection
    // found it before, at 10,000 agents 500 pings a second, each a timer, a write and a read:
    // 12-17 % of the gateway's CPU between heartbeats (agent-fanin, alternated runs). Kept,
    // rarely, for a connection with no agent stream on it (a health check's): no heartbeat to miss.
    "grpc.keepalive_time_ms": 300_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.http2.min_ping_interval_without_data_ms": 5_000,
    "grpc.max_receive_message_length": 8 * 1024 * 1024,
    // channelz (a debugging service this gateway does not serve) keeps a tracker and a trace
    // per connection and per call: memory for each of 10,000 agents, read by nobody.
    "grpc.enable_channelz": 0,
  });
  server.addService(AgentGatewayService, {
    connect: (call: Parameters<typeof handleConnect>[1]) => handleConnect(deps, call),
  });
  new HealthImplementation({ "": "SERVING", "relayctl.agent.v1.AgentGateway": "SERVING" }).addToServer(
    server,
  );
  if (reflection) {
    const protoRoot = dirname(require.resolve("@relayctl/proto/package.json"));
    new ReflectionService(
      loadSync(join(protoRoot, "agent/v1/agent.proto"), { includeDirs: [protoRoot] }),
    ).addToServer(server);
  }
  const creds = tls
    ? ServerCredentials.createSsl(null, [
        { cert_chain: readFileSync(tls.certFile), private_key: readFileSync(tls.keyFile) },
      ])
    : ServerCredentials.createInsecure();
  // Its handshakes end at their Welcomes (agent-stream.ts), which give their slots back.
  const gate = new HandshakeGate(maxHandshakes);
  deps.handshakes = gate;
  observeHandshakes(gate);
  const { listener, port } = await listenForGrpc(server, creds, listen, gate);
  const host = listen.host.includes(":") ? `[${listen.host}]` : listen.host;
  return {
    url: `${tls ? "grpcs" : "grpc"}://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        listener.close();
        deps.registry.closeAll("gateway shutting down");
        const force = setTimeout(() => server.forceShutdown(), 2000);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}

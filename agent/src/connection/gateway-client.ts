// A grpc-js client for one gateway URL: grpc://host:port is plaintext,
// grpcs://host:port is TLS (system roots, or the CA bundle from config).
import { readFileSync } from "node:fs";
import { type ChannelOptions, credentials } from "@grpc/grpc-js";
import { AgentGatewayClient } from "@relayctl/proto";

// The stream is idle apart from heartbeats, and a gateway that vanished without a
// FIN (host down, network cut) would otherwise be noticed only when the kernel
// gives up on unacked writes, minutes later. HTTP/2 pings find it within ~25 s.
// The agent's own schedule (backoff.ts) decides when it dials again, not grpc-js's:
// a channel keeps a reconnect backoff of its own (1 s, ×1.6 per failure up to 120 s,
// reset only by a connection) during which a call fails at once without dialling,
// and its shared subchannel pool would hand that state to the next session's client.
// So each client has its own subchannel, and the channel's own backoff stays below
// the agent's smallest delay.
export const CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.keepalive_time_ms": 15_000,
  "grpc.keepalive_timeout_ms": 10_000,
  "grpc.keepalive_permit_without_calls": 1,
  "grpc.use_local_subchannel_pool": 1,
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 100,
};

export function parseGatewayUrl(url: string): { address: string; tls: boolean } {
  const match = /^(grpcs?):\/\/([^/\s]+)\/?$/.exec(url);
  if (!match) throw new Error(`bad gateway URL (want grpc://host:port or grpcs://host:port): ${url}`);
  return { address: match[2]!, tls: match[1] === "grpcs" };
}

export function createGatewayClient(url: string, caFile?: string): AgentGatewayClient {
  const { address, tls } = parseGatewayUrl(url);
  const creds = tls
    ? credentials.createSsl(caFile ? readFileSync(caFile) : null)
    : credentials.createInsecure();
  return new AgentGatewayClient(address, creds, CHANNEL_OPTIONS);
}

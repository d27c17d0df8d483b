// A child process of agent-fanin: runs the simulated agents whose credentials it is given (JSON
// file in argv[2]) against the gateway address in argv[3], and reports to its parent over IPC
// every 250 ms: how many are connected now, and the fleet's counters.
import { readFileSync } from "node:fs";
import { SimAgent, newCounters } from "./sim-agent.mjs";

const enrolled = JSON.parse(readFileSync(process.argv[2], "utf8"));
const address = process.argv[3];
const counters = newCounters();
// The real agent's defaults (RELAYCTL_AGENT_BACKOFF_MIN_MS / _MAX_MS).
const backoff = { minMs: Number(process.argv[4] ?? 250), maxMs: Number(process.argv[5] ?? 15_000) };
// "grpc-js" (the agent's own client) or "h2" (sim-h2-call.mjs): BENCH_SIM_CLIENT, inherited.
const client = process.env.BENCH_SIM_CLIENT || "grpc-js";
const agents = enrolled.map(
  (e) =>
    new SimAgent({
      gatewayAddress: address,
      credential: e.credential,
      serverId: e.serverId,
      counters,
      backoff,
      client,
    }),
);
// Dialled in slices so the start itself is not one burst of thousands of handshakes.
let next = 0;
const dial = setInterval(() => {
  for (const a of agents.slice(next, next + 200)) a.start();
  next += 200;
  if (next >= agents.length) clearInterval(dial);
}, 50);
const report = setInterval(() => {
  let connected = 0;
  for (const a of agents) if (a.connected) connected++;
  process.send?.({ connected, counters, rss: process.memoryUsage().rss });
}, 250);
process.on("message", (m) => {
  if (m === "stop") {
    clearInterval(dial);
    clearInterval(report);
    for (const a of agents) a.stop();
    setTimeout(() => process.exit(0), 200);
  }
});
process.on("disconnect", () => process.exit(0));

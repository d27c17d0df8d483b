// Simulated agents for the capacity benches: each one speaks the real agent protocol
// (relayctl.agent.v1 over gRPC, the generated client of @relayctl/proto) with its own enrolled
// credential — Hello, Welcome, heartbeats at the interval the gateway asks for, an immediate
// JobResult (exit 0, no pty) for every Job, which acks it as the real agent's result does for a job
// finished within its ackAfterMs (a duplicate delivery gets a JobAck), ResultAck — and reconnects after the stream
// ends on the real agent's schedule and channel options: its Backoff class and CHANNEL_OPTIONS
// (agent/dist). The agent makes a new client per session; a simulated one keeps its client (a
// channel of its own, whose own backoff those options keep below the schedule's) after a session
// that was welcomed, since 10,000 new channels a second would cost this one machine more than the
// gateway they test, and closes it after one that was not, as the agent does. With
// `client: "h2"` it dials its stream over node:http2 alone (sim-h2-call.mjs: the same bytes on the
// wire, without grpc-js's client machinery). What the control plane sees is an agent; only the
// command is not run.
import { fork } from "node:child_process";
import { writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { Metadata, credentials } from "@grpc/grpc-js";
import { AgentGatewayClient, JobStatus } from "@relayctl/proto";
import { Backoff } from "../../agent/dist/connection/backoff.js";
import { WELCOME_TIMEOUT_MS } from "../../agent/dist/connection/agent-connection.js";
import { CHANNEL_OPTIONS } from "../../agent/dist/connection/gateway-client.js";
import { H2ConnectCall } from "./sim-h2-call.mjs";

const DEFAULT_HEARTBEAT_MS = 5000;

/**
 * Per gateway address: whether a probe of this process was accepted since a stream to it was last
 * lost or a probe refused (SimAgent#retry). Agents after it dial without a probe of their own.
 */
const gatewaySeenUp = new Map();

export class SimAgent {
  /**
   * `credential` is the rag_ token from enrollment; `counters` is shared by a fleet (jobs,
   * results acked, duplicates, connects). `client`: "grpc-js" (the agent's client) or "h2"
   * (sim-h2-call.mjs), both with the agent's CHANNEL_OPTIONS.
   */
  constructor({
    gatewayAddress,
    credential,
    serverId,
    counters,
    backoff = { minMs: 250, maxMs: 15_000 },
    client = "grpc-js",
  }) {
    if (client !== "grpc-js" && client !== "h2") throw new Error(`unknown simulated agent client: ${client}`);
    this.clientKind = client;
    this.gatewayAddress = gatewayAddress;
    this.credential = credential;
    this.serverId = serverId;
    this.counters = counters;
    // The real agent's reconnect schedule (agent/src/connection/backoff.ts), its defaults.
    this.backoff = new Backoff(backoff.minMs, backoff.maxMs);
    this.connected = false;
    this.stopped = false;
    /** Operation ids answered and not yet ResultAcked: re-sent after the next Welcome. */
    this.unacked = new Map();
    this.seen = new Set();
    this.client = null;
  }

  start() {
    this.#dial();
  }

  #dial() {
    if (this.stopped) return;
    let call;
    if (this.clientKind === "h2") {
      call = new H2ConnectCall(this.gatewayAddress, this.credential, CHANNEL_OPTIONS);
    } else {
      // One connection per agent, as separate agent processes have (its own subchannel).
      this.client ??= new AgentGatewayClient(
        this.gatewayAddress,
        credentials.createInsecure(),
        CHANNEL_OPTIONS,
      );
      const md = new Metadata();
      md.set("authorization", `Bearer ${this.credential}`);
      call = this.client.connect(md);
    }
    this.call = call;
    let heartbeat;
    let ended = false;
    // As the agent: a gateway that gives no Welcome in time is given up on (and dialled again).
    const welcomeTimer = setTimeout(() => end(), WELCOME_TIMEOUT_MS);
    const end = () => {
      if (ended) return;
      ended = true;
      clearTimeout(welcomeTimer);
      clearInterval(heartbeat);
      if (this.connected) this.counters.disconnects++;
      else this.counters.failedDials++;
      const welcomed = this.connected;
      this.connected = false;
      // A lost stream, or a dial that was not welcomed: the next attempts probe again.
      gatewaySeenUp.set(this.gatewayAddress, false);
      this.call = null;
      try {
        call.cancel();
      } catch {}
      // The agent closes its client after every session. Kept after a session that was welcomed
      // (its connection is gone with the gateway); closed after one that was not (a Welcome
      // timeout, a refusal), whose connection the gateway may still hold: kept, it stayed open with
      // a cancelled call on it, and the next call came on the same connection, which no agent does.
      if (!welcomed && this.client) {
        this.client.close();
        this.client = null;
      }
      if (this.stopped) return;
      setTimeout(() => this.#retry(), this.backoff.next());
    };
    call.on("data", (m) => {
      const msg = m.msg;
      if (msg?.$case === "welcome") {
        clearTimeout(welcomeTimer);
        this.backoff.reset();
        this.connected = true;
        this.counters.connects++;
        this.connectedAt = performance.now();
        this.onConnected?.(this);
        const every = msg.welcome.heartbeatIntervalMs || DEFAULT_HEARTBEAT_MS;
        heartbeat = setInterval(() => {
          this.counters.heartbeats++;
          call.write({ msg: { $case: "heartbeat", heartbeat: { runningOperationIds: [] } } });
        }, every);
        heartbeat.unref?.();
        for (const r of this.unacked.values()) call.write({ msg: { $case: "jobResult", jobResult: r } });
      } else if (msg?.$case === "job") {
        const id = msg.job.operationId;
        if (this.seen.has(id)) {
          call.write({ msg: { $case: "jobAck", jobAck: { operationId: id } } });
          this.counters.duplicates++;
          const r = this.unacked.get(id);
          if (r) call.write({ msg: { $case: "jobResult", jobResult: r } });
          return;
        }
        this.seen.add(id);
        this.counters.jobs++;
        const result = {
          operationId: id,
          status: JobStatus.JOB_STATUS_COMPLETED,
          exitCode: 0,
          stdout: "",
          stderr: "",
          durationMs: 0,
          error: "",
          detail: undefined,
        };
        this.unacked.set(id, result);
        call.write({ msg: { $case: "jobResult", jobResult: result } });
      } else if (msg?.$case === "resultAck") {
        if (this.unacked.delete(msg.resultAck.operationId)) this.counters.resultsAcked++;
      }
    });
    call.on("error", end);
    call.on("end", end);
    call.on("close", end);
    call.write({
      msg: {
        $case: "hello",
        hello: {
          agentVersion: "bench-sim-0",
          bootId: "bench-sim-boot",
          hostname: `sim-${this.serverId.slice(0, 8)}`,
          // Every scalar set: ts-proto's encoder writes an int64 it is not given as undefined and throws.
          bootedAtUnixMs: 0,
          runningOperationIds: [],
        },
      },
    });
  }

  /**
   * A retry after a lost stream. While the gateway is down, 10,000 agents' attempts through
   * grpc-js (~0.35 ms of CPU each, to be refused) would cost this one machine more than two cores
   * and starve the gateway they test; a remote agent pays that on its own machine. So a TCP
   * connect is tried first: refused, it is a failed attempt on the same schedule; accepted, it is
   * closed and the real dial follows at once. Once a probe of this process was accepted, the
   * others dial at once, as agents do, until a probe is refused or a stream is lost again: a
   * probe that is accepted is a connection the gateway accepts and closes for nothing, which no
   * agent makes: with a probe each, at least one per agent through a storm (10,000), against 2,982
   * in a measured storm of 10,000 with this.
   */
  #retry() {
    if (this.stopped) return;
    if (gatewaySeenUp.get(this.gatewayAddress)) {
      this.#dial();
      return;
    }
    const [host, port] = splitAddress(this.gatewayAddress);
    const probe = connect({ host, port });
    probe.once("connect", () => {
      probe.destroy();
      gatewaySeenUp.set(this.gatewayAddress, true);
      this.#dial();
    });
    probe.once("error", () => {
      probe.destroy();
      gatewaySeenUp.set(this.gatewayAddress, false);
      this.counters.refusedProbes++;
      if (!this.stopped) setTimeout(() => this.#retry(), this.backoff.next());
    });
  }

  stop() {
    this.stopped = true;
    try {
      this.call?.cancel();
    } catch {}
    this.client?.close();
  }
}

/** "host:port" or "[v6]:port" → [host, port]. */
function splitAddress(address) {
  const i = address.lastIndexOf(":");
  return [address.slice(0, i).replace(/^\[|\]$/g, ""), Number(address.slice(i + 1))];
}

export function newCounters() {
  return {
    connects: 0,
    disconnects: 0,
    // Streams that ended before their Welcome, and TCP probes refused (sim-agent's #retry).
    failedDials: 0,
    refusedProbes: 0,
    heartbeats: 0,
    jobs: 0,
    duplicates: 0,
    resultsAcked: 0,
  };
}

/**
 * Enrolls `n` servers through the api's real enrollment endpoint, with join tokens written straight
 * into the database (`createJoinToken`, what `admin create-join-token` runs, without a process per
 * token). Returns [{ serverId, credential }].
 */
export async function enrollServers(db, createJoinToken, { baseUrl, tenantId, n, prefix = "sim" }) {
  const out = [];
  const batch = 20;
  for (let i = 0; i < n; i += batch) {
    const part = await Promise.all(
      Array.from({ length: Math.min(batch, n - i) }, async (_, j) => {
        const name = `${prefix}-${i + j}`;
        const { join_token } = await createJoinToken(db, {
          tenant: tenantId,
          serverName: name,
          ttlMinutes: 60,
        });
        const res = await fetch(`${baseUrl}/api/agent/enroll`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ join_token, hostname: name, agent_version: "bench-sim-0" }),
        });
        const body = await res.json();
        if (res.status !== 201) throw new Error(`enroll ${name}: ${res.status} ${JSON.stringify(body)}`);
        return { serverId: body.server_id, credential: body.agent_credential };
      }),
    );
    out.push(...part);
  }
  return out;
}

/** Starts one SimAgent per enrolled server and resolves once all are welcomed. */
export async function startFleet(gatewayUrl, enrolled, { timeoutMs = 60_000, backoff } = {}) {
  const address = gatewayUrl.replace(/^grpc:\/\//, "").replace(/\/$/, "");
  const counters = newCounters();
  const agents = enrolled.map(
    (e) =>
      new SimAgent({
        gatewayAddress: address,
        credential: e.credential,
        serverId: e.serverId,
        counters,
        backoff,
      }),
  );
  for (const a of agents) a.start();
  await waitFor(() => agents.every((a) => a.connected), timeoutMs, "simulated agents connected");
  const stop = () => {
    for (const a of agents) a.stop();
  };
  return { agents, counters, stop };
}

/**
 * The same fleet in a process of its own (sim-agent-worker.mjs), as remote agents are: its gRPC
 * work does not share an event loop, or a core, with the load generator. Resolves once all are
 * welcomed; `counters` are the worker's latest report (every 250 ms), `pid` its process.
 */
export async function startFleetProcess(gatewayUrl, enrolled, dir, { timeoutMs = 60_000 } = {}) {
  const address = gatewayUrl.replace(/^grpc:\/\//, "").replace(/\/$/, "");
  const file = join(dir, "sim-agents.json");
  writeFileSync(file, JSON.stringify(enrolled), { mode: 0o600 });
  const child = fork(join(import.meta.dirname, "sim-agent-worker.mjs"), [file, address], {
    stdio: "inherit",
  });
  let state = { connected: 0, counters: newCounters() };
  let exited = false;
  child.on("message", (m) => {
    state = m;
  });
  child.on("exit", () => {
    exited = true;
  });
  const fleet = {
    pid: child.pid,
    get counters() {
      return state.counters;
    },
    /** A report taken after this call (the counters as they are now, not 250 ms ago). */
    fresh: () => new Promise((resolve) => child.once("message", () => resolve(state.counters))),
    stop: () => {
      if (child.connected) child.send("stop");
    },
  };
  try {
    await waitFor(
      () => {
        if (exited) throw new Error("the simulated agents' process exited");
        return state.connected === enrolled.length;
      },
      timeoutMs,
      "simulated agents connected",
    );
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
  return fleet;
}

/** Polls `cond` every 20 ms until true or the deadline. */
export async function waitFor(cond, timeoutMs, what) {
  const deadline = performance.now() + timeoutMs;
  while (!cond()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

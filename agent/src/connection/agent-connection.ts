// The agent's one stream to a gateway. Dials the gateway URLs in turn (round
// robin, from a random first one so a fleet spreads over the gateways), sends
// Hello, waits for Welcome, then heartbeats and hands Jobs and ResultAcks to the
// dispatcher. When the stream ends it backs off (exponential,
// full jitter; reset by a Welcome) and dials the next gateway. Jobs keep running
// meanwhile; their results wait on disk.
import { EventEmitter } from "node:events";
import { Metadata, type ServiceError, status } from "@grpc/grpc-js";
import type {
  AgentMessage,
  ApplicationContainer,
  EngineStatus,
  GatewayMessage,
  ProxyStatus,
  Welcome,
} from "@relayctl/proto";
import { sameStatus } from "../engine/choice.js";
import { sameProxyStatus } from "../proxy-status/check.js";
import type { ProxyMonitor } from "../proxy-status/proxy-monitor.js";
import type { ContainerWatcher } from "../containers/watcher.js";
import type { Dispatcher } from "../jobs/dispatcher.js";
import type { Logger } from "../log.js";
import { Backoff } from "./backoff.js";
import { createGatewayClient } from "./gateway-client.js";
import { bootId, bootedAt, hostName } from "./host-info.js";

// A refused connection fails the call at once (grpc-js fails fast when not
// waitForReady); a black-holed or stuck gateway is given up on when no Welcome
// came in this long, and the next gateway is tried.
export const WELCOME_TIMEOUT_MS = 15_000;
const DEFAULT_HEARTBEAT_MS = 5000;

export interface AgentConnectionOptions {
  gatewayUrls: string[];
  /** The `rag_...` credential from enrollment. */
  credential: string;
  caFile?: string;
  backoff: { minMs: number; maxMs: number };
  agentVersion: string;
  dispatcher: Dispatcher;
  /** The reverse proxy's status, sent with Hello and on every change; none sent without it. */
  proxyStatus?: ProxyMonitor;
  /** The deployed containers' states, sent after Welcome and on every change; none sent without it. */
  containers?: ContainerWatcher;
  log: Logger;
  /** @default /proc/sys/kernel/random/boot_id */
  bootIdFile?: string;
  /** Picks the first gateway dialled (`floor(random() * n)`). @default Math.random */
  random?: () => number;
}

export interface AgentConnectionEvents {
  connected: [welcome: Welcome, gatewayUrl: string];
  disconnected: [gatewayUrl: string];
}

export class AgentConnection extends EventEmitter<AgentConnectionEvents> {
  readonly #backoff: Backoff;
  readonly #stop = new AbortController();
  #endSession: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(readonly options: AgentConnectionOptions) {
    super();
    this.#backoff = new Backoff(options.backoff.minMs, options.backoff.maxMs);
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Closes the stream and stops reconnecting. Running jobs are not touched. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#endSession?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const { gatewayUrls, log } = this.options;
    // Every agent starting at the first URL put the whole fleet on one gateway and
    // left the others idle until it failed (then all of it moved at once).
    const first = Math.floor((this.options.random ?? Math.random)() * gatewayUrls.length);
    for (let i = first; !this.#stop.signal.aborted; i++) {
      const url = gatewayUrls[i % gatewayUrls.length]!;
      await this.#session(url).catch((err) => log.error({ err, gateway: url }, "stream failed"));
      if (this.#stop.signal.aborted) break;
      const delayMs = this.#backoff.next();
      log.debug({ delay_ms: delayMs }, "reconnecting");
      await sleep(delayMs, this.#stop.signal);
    }
  }

  /** One stream, from dial to end. Resolves when it is over. */
  async #session(url: string): Promise<void> {
    const { log, dispatcher } = this.options;
    const client = createGatewayClient(url, this.options.caFile);
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${this.options.credential}`);
    const call = client.connect(metadata);
    let ended = false;
    let heartbeat: NodeJS.Timeout | undefined;
    let stopReporting = () => {};
    const send = (message: AgentMessage) => {
      if (!ended) call.write(message);
    };
    const welcomeTimer = setTimeout(() => {
      log.warn({ gateway: url }, "no Welcome from gateway");
      call.cancel();
    }, WELCOME_TIMEOUT_MS);

    await new Promise<void>((resolve) => {
      const end = () => {
        if (ended) return;
        ended = true;
        clearTimeout(welcomeTimer);
        clearInterval(heartbeat);
        stopReporting();
        dispatcher.detach();
        call.cancel();
        client.close();
        this.#endSession = undefined;
        this.emit("disconnected", url);
        resolve();
      };
      this.#endSession = end;
      if (this.#stop.signal.aborted) return end();

      // The engine decision as the gateway last heard it: sent with Hello, then
      // on every change (a probe that ends after Hello is one of them).
      let reported = dispatcher.engines.current?.status;
      let attached = false;
      const reportEngine = (engine: EngineStatus) => {
        if (!attached || sameStatus(reported, engine)) return;
        reported = engine;
        send({ msg: { $case: "engineStatus", engineStatus: engine } });
      };
      dispatcher.engines.on("change", reportEngine);
      // The proxy's status, the same way.
      const proxyMonitor = this.options.proxyStatus;
      let reportedProxy = proxyMonitor?.current;
      const reportProxy = (proxy: ProxyStatus) => {
        if (!attached || sameProxyStatus(reportedProxy, proxy)) return;
        reportedProxy = proxy;
        send({ msg: { $case: "proxyStatus", proxyStatus: proxy } });
      };
      proxyMonitor?.on("change", reportProxy);
      // The containers' states: the whole report after Welcome, then each change.
      const watcher = this.options.containers;
      const reportContainers = (applications: ApplicationContainer[]) => {
        if (attached) send({ msg: { $case: "containerReport", containerReport: { applications } } });
      };
      watcher?.on("change", reportContainers);
      stopReporting = () => {
        dispatcher.engines.off("change", reportEngine);
        proxyMonitor?.off("change", reportProxy);
        watcher?.off("change", reportContainers);
      };

      call.on("data", (message: GatewayMessage) => {
        const msg = message.msg;
        switch (msg?.$case) {
          case "welcome": {
            clearTimeout(welcomeTimer);
            this.#backoff.reset();
            log.info(
              { server_id: msg.welcome.serverId, server_name: msg.welcome.serverName, gateway: url },
              "connected",
            );
            dispatcher.attach(send);
            attached = true;
            const engine = dispatcher.engines.current?.status;
            if (engine) reportEngine(engine);
            const proxy = proxyMonitor?.current;
            if (proxy) reportProxy(proxy);
            const containers = watcher?.current;
            if (containers) reportContainers(containers);
            const everyMs = msg.welcome.heartbeatIntervalMs || DEFAULT_HEARTBEAT_MS;
            heartbeat = setInterval(() => {
              send({
                msg: {
                  $case: "heartbeat",
                  heartbeat: { runningOperationIds: dispatcher.runningOperationIds() },
                },
              });
            }, everyMs);
            this.emit("connected", msg.welcome, url);
            dispatcher.resendUnacked().catch((err) => log.error({ err }, "cannot re-send unacked results"));
            break;
          }
          case "job":
            dispatcher.handleJob(msg.job).catch((err) => log.error({ err }, "job dispatch failed"));
            break;
          case "cancelJob":
            dispatcher.cancelJob(msg.cancelJob.operationId);
            break;
          case "resultAck":
            dispatcher
              .handleResultAck(msg.resultAck.operationId)
              .catch((err) => log.error({ err }, "result ack failed"));
            break;
          default:
            log.warn("unknown message from gateway ignored");
        }
      });
      call.on("error", (err: ServiceError) => {
        if (err.code === status.UNAUTHENTICATED)
          log.error({ gateway: url }, "gateway rejected the agent credential");
        else if (err.code !== status.CANCELLED) log.warn({ gateway: url, err: err.message }, "stream ended");
        end();
      });
      call.on("end", end);

      send({
        msg: {
          $case: "hello",
          hello: {
            agentVersion: this.options.agentVersion,
            bootId: bootId(this.options.bootIdFile),
            hostname: hostName(),
            bootedAtUnixMs: bootedAt(),
            runningOperationIds: dispatcher.runningOperationIds(),
            engine: reported,
            proxy: reportedProxy,
          },
        },
      });
    });
  }
}

/** A delay that ends early (without error) when the agent stops. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

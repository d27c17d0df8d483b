// Owns the agent's view of its reverse proxy over time (check.ts): checked at
// start, every recheck interval, and again right after a route write the proxy
// did not take (so a crashed dev Caddy is reported within seconds, not at the
// next interval). Each change is logged once and emitted ("change") for the
// gateway stream, as engine-monitor.ts does for the container engine.
import { EventEmitter } from "node:events";
import type { ProxyStatus } from "@relayctl/proto";
import type { ProxyConfig } from "../config.js";
import type { Logger } from "../log.js";
import { type CheckOptions, checkProxy, logMessage, sameProxyStatus } from "./check.js";

/** A failed write may ask for a check at most this often: a burst of failures is one check. */
const MIN_RECHECK_MS = 2000;

/**
 * Route writes fail in route-sync.ts and switch-step.ts, which the dispatcher
 * builds without a handle on the monitor; they report here and the agent's one
 * monitor listens. An emitter with no listener (unit tests of those jobs) is a no-op.
 */
const writeFailures = new EventEmitter<{ failed: [] }>();

/** A route write failed (the proxy may have gone away): the monitor checks again soon. */
export function proxyWriteFailed(): void {
  writeFailures.emit("failed");
}

export interface ProxyMonitorOptions {
  proxy: ProxyConfig;
  log: Logger;
  /** Re-check period (ms); 0: only at start and after failed writes. @default 30000 */
  recheckMs?: number;
  check?: (proxy: ProxyConfig, opts?: CheckOptions) => Promise<ProxyStatus>;
}

export class ProxyMonitor extends EventEmitter<{ change: [status: ProxyStatus] }> {
  #status: ProxyStatus | undefined;
  #checking: Promise<ProxyStatus> | undefined;
  #checkedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #onWriteFailed = () => {
    if (Date.now() - this.#checkedAt >= MIN_RECHECK_MS) void this.recheck();
  };

  constructor(readonly options: ProxyMonitorOptions) {
    super();
  }

  start(): void {
    void this.recheck();
    writeFailures.on("failed", this.#onWriteFailed);
    const every = this.options.recheckMs ?? 30_000;
    // kind none never changes: no timer for it.
    if (every > 0 && this.options.proxy.kind !== "none" && this.#timer === undefined) {
      this.#timer = setInterval(() => void this.recheck(), every);
      this.#timer.unref(); // never what keeps the agent alive
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    writeFailures.off("failed", this.#onWriteFailed);
  }

  /** The last check's status; undefined until the first check ends. */
  get current(): ProxyStatus | undefined {
    return this.#status;
  }

  /** Checks now; a check already running is shared, not repeated. */
  recheck(): Promise<ProxyStatus> {
    this.#checking ??= this.#check().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  async #check(): Promise<ProxyStatus> {
    const status = await (this.options.check ?? checkProxy)(this.options.proxy);
    this.#checkedAt = Date.now();
    const before = this.#status;
    this.#status = status;
    if (!sameProxyStatus(before, status)) {
      const fields = { proxy: status.kind, ok: status.ok };
      // Only a change of ok is worth a line at error/info; a changed detail alone (another errno) is debug.
      const msg = logMessage(before, status);
      if (before !== undefined && before.ok === status.ok) this.options.log.debug(fields, msg);
      else if (status.ok) this.options.log.info(fields, msg);
      else this.options.log.error(fields, msg);
      this.emit("change", status);
    }
    return status;
  }
}

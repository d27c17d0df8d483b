// Owns the agent's container-engine decision (choice.ts) over time: probed at
// start, again every recheck interval, and again when a job finds the cached
// choice not working (or its engine call failing), so an engine installed or
// started later is found without restarting the agent. Never probes on the
// exec path: exec needs no engine, and current() only reads the cache. Each
// change is logged once and emitted ("change") for the gateway stream.
import { EventEmitter } from "node:events";
import type { Logger } from "../log.js";
import { type EngineDecision, type EngineStatus, decide, logMessage, sameStatus } from "./choice.js";
import { DockerEngine } from "./docker-engine.js";
import type { ContainerEngine } from "./engine.js";
import { PodmanEngine } from "./podman-engine.js";
import { type EngineName, type Probe, probeEngine } from "./probe.js";
import { type EngineSetting, selectEngine } from "./select.js";

/**
 * A job may ask for a fresh probe at most this often: a burst of deployments
 * to a machine without an engine must not become a burst of `info` calls.
 */
const MIN_RECHECK_MS = 2000;

export interface EngineMonitorOptions {
  setting: EngineSetting;
  log: Logger;
  /** Re-probe period (ms); 0: only at start and when a job finds the engine failing. @default 300000 */
  recheckMs?: number;
  /** The probe of one engine. @default probeEngine (`<engine> info`) */
  probe?: Probe;
}

export interface EngineMonitorEvents {
  change: [status: EngineStatus];
}

export class EngineMonitor extends EventEmitter<EngineMonitorEvents> {
  #decision: EngineDecision | undefined;
  #probing: Promise<EngineDecision> | undefined;
  #probedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #engines = new Map<EngineName, ContainerEngine>();

  constructor(readonly options: EngineMonitorOptions) {
    super();
  }

  /** First probe (in the background) and the periodic re-probe. */
  start(): void {
    void this.recheck();
    const every = this.options.recheckMs ?? 300_000;
    if (every > 0 && this.#timer === undefined) {
      this.#timer = setInterval(() => void this.recheck(), every);
      this.#timer.unref(); // never what keeps the agent alive
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The cached decision; undefined until the first probe ends. Never probes. */
  get current(): EngineDecision | undefined {
    return this.#decision;
  }

  /** Probes now; a probe already running is shared, not repeated. */
  recheck(): Promise<EngineDecision> {
    this.#probing ??= this.#probe().finally(() => {
      this.#probing = undefined;
    });
    return this.#probing;
  }

  /**
   * The decision a job that needs the engine (deploy, restart, registry login)
   * goes by: the first probe's when it is still running, a fresh one when the
   * cached decision found no working engine (it may have been started since).
   */
  async forJob(): Promise<EngineDecision> {
    const d = this.#decision;
    if (d === undefined) return this.recheck();
    if (!d.status.ok && Date.now() - this.#probedAt >= MIN_RECHECK_MS) return this.recheck();
    return d;
  }

  /** A job's engine call failed: the daemon may have gone away; probe again in the background. */
  engineFailed(): void {
    if (Date.now() - this.#probedAt >= MIN_RECHECK_MS) void this.recheck();
  }

  /**
   * The engine of the cached decision, never probing: the working one, else the
   * CLI present, else the setting's static pick (select.ts) before any probe.
   */
  now(): ContainerEngine {
    const d = this.#decision;
    const name = d?.working ?? d?.cli;
    return name ? this.engine(name) : selectEngine(this.options.setting);
  }

  /** The adapter of an engine (one per name, reused). */
  engine(name: EngineName): ContainerEngine {
    let e = this.#engines.get(name);
    if (e === undefined) {
      e = name === "docker" ? new DockerEngine() : new PodmanEngine();
      this.#engines.set(name, e);
    }
    return e;
  }

  async #probe(): Promise<EngineDecision> {
    const probe = this.options.probe ?? ((name: EngineName) => probeEngine(name));
    const d = await decide(this.options.setting, probe);
    this.#probedAt = Date.now();
    const before = this.#decision?.status;
    this.#decision = d;
    if (!sameStatus(before, d.status)) {
      const fields = { engine: d.status.name || null, version: d.status.version || null, ok: d.status.ok };
      if (d.status.ok) this.options.log.info(fields, logMessage(d));
      else this.options.log.error(fields, logMessage(d));
      this.emit("change", d.status);
    }
    return d;
  }
}

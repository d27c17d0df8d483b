// RouteSyncJob (external deploy) → the reverse-proxy-sync library → a JobResult
// carrying a RouteSyncReport in its detail (agent.proto), which the control plane
// reads, and one line per route in stdout, which a person reads. The writer follows the agent's proxy setting; the
// route ledger lives in the state dir (routes.json) so drift is told apart from
// a first sync across agent restarts.
import { join } from "node:path";
import {
  type JobResult,
  JobStatus,
  RouteOutcomeStatus,
  type RouteSyncJob,
  type RouteSyncReport,
} from "@relayctl/proto";
import {
  CaddyWriter,
  NginxWriter,
  RouteLedger,
  RouteSyncer,
  type RouteWriter,
  TraefikWriter,
} from "@relayctl/reverse-proxy-sync";
import type { ProxyConfig } from "../config.js";
import { ContainerView } from "../engine/container-view.js";
import { EngineApi, engineSocketPath } from "../engine/engine-api.js";
import { podmanEventsLogPath } from "../engine/events-file.js";
import type { ContainerEngine } from "../engine/engine.js";
import { type EngineSetting, selectEngine } from "../engine/select.js";
import { proxyWriteFailed } from "../proxy-status/proxy-monitor.js";
import { PortCheck, syncCheckedRoutes } from "./port-check.js";

/** Used when the gateway sends no deadline (an older control plane). */
const DEFAULT_DEADLINE_SECONDS = 120;

function writerFor(proxy: Exclude<ProxyConfig, { kind: "none" }>): RouteWriter {
  switch (proxy.kind) {
    case "caddy":
      return new CaddyWriter({
        adminUrl: proxy.adminUrl,
        serverName: proxy.serverName,
        listen: proxy.listen,
        automaticHttps: proxy.automaticHttps,
      });
    case "nginx":
      return new NginxWriter({
        confDir: proxy.confDir,
        listen: proxy.listen,
        nginxBin: proxy.nginxBin,
        configFile: proxy.configFile,
        prefix: proxy.prefix,
      });
    case "traefik":
      return new TraefikWriter({ dir: proxy.dir, entryPoints: proxy.entryPoints });
  }
}

const OUTCOME_STATUS = {
  synced: RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_SYNCED,
  noop: RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_NOOP,
  drift_recovered: RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_DRIFT_RECOVERED,
  failed: RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_FAILED,
} as const;

function failed(operationId: string, why: string, startedAt: number): JobResult {
  return {
    operationId,
    status: JobStatus.JOB_STATUS_FAILED,
    exitCode: -1,
    stdout: "",
    stderr: why,
    durationMs: Date.now() - startedAt,
    error: why,
    detail: undefined,
  };
}

function completed(operationId: string, report: RouteSyncReport, startedAt: number): JobResult {
  const name = (s: RouteOutcomeStatus) =>
    Object.entries(OUTCOME_STATUS).find(([, v]) => v === s)?.[0] ?? "unknown";
  const line = (r: RouteSyncReport["routes"][number]) =>
    `${r.applicationId} ${name(r.status)} ${r.fqdns.join(",")} -> ${r.upstream || "-"}`;
  const stdout = [
    ...report.routes.map(line),
    ...report.removedApplicationIds.map((id) => `${id} removed`),
  ].join("\n");
  const failures = report.routes
    .filter((r) => r.status === RouteOutcomeStatus.ROUTE_OUTCOME_STATUS_FAILED)
    .map((r) => `${r.applicationId}: ${r.error}`);
  return {
    operationId,
    status: JobStatus.JOB_STATUS_COMPLETED,
    exitCode: 0,
    stdout: stdout ? `${stdout}\n` : "",
    stderr: failures.join("\n"),
    durationMs: Date.now() - startedAt,
    error: "",
    detail: { $case: "routeSync", routeSync: report },
  };
}

export class RouteSyncRunner {
  #syncer: Promise<RouteSyncer> | undefined;
  /** One client (keep-alive connections) per engine API socket, kept for the process. */
  readonly #apis = new Map<string, EngineApi>();
  /**
   * The containers of the engine the port check asks now (container-view.ts),
   * kept between syncs; a new one (built from one list) when the engine choice
   * or its socket changes.
   */
  #view: ContainerView | undefined;

  constructor(
    readonly proxy: ProxyConfig,
    readonly stateDir: string,
    /**
     * Engine of the port check (port-check.ts) every route passes before it is
     * written: a fixed setting, or the agent's current decision (engine-monitor.ts).
     */
    readonly containerEngine: EngineSetting | (() => ContainerEngine) = "auto",
  ) {}

  /**
   * The process's one syncer (and ledger), shared by route-sync jobs and the
   * deployments' switch step: syncs are serialised inside it, and both see the
   * same routes.json. Undefined when no proxy is configured.
   */
  syncer(): Promise<RouteSyncer> | undefined {
    const proxy = this.proxy;
    if (proxy.kind === "none") return undefined;
    this.#syncer ??= RouteLedger.open(join(this.stateDir, "routes.json")).then(
      (ledger) => new RouteSyncer({ writer: writerFor(proxy), ledger, upstreamMode: proxy.upstream }),
    );
    return this.#syncer;
  }

  /** `claim`: nothing is written to the proxy before it resolves (the job's durable claim). */
  async run(operationId: string, job: RouteSyncJob, claim?: Promise<void>): Promise<JobResult> {
    const startedAt = Date.now();
    const proxy = this.proxy;
    if (proxy.kind === "none") {
      const why =
        "this agent has no reverse proxy configured: set RELAYCTL_AGENT_PROXY to caddy, nginx or traefik";
      return failed(operationId, why, startedAt);
    }
    const syncer = await this.syncer()!;
    const deadlineMs = (job.deadlineSeconds || DEFAULT_DEADLINE_SECONDS) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), deadlineMs);
    });
    const report = await Promise.race([this.#sync(syncer, job, claim), late]).finally(() =>
      clearTimeout(timer),
    );
    // A route the proxy did not take (or no answer at all) may mean the proxy went
    // away: the agent's proxy check runs again now rather than at its next interval.
    if (report === "late" || report.routes.some((o) => o.status === "failed")) proxyWriteFailed();
    if (report === "late") {
      const why = `the ${proxy.kind} proxy did not take the routes within ${deadlineMs / 1000} s`;
      return failed(operationId, why, startedAt);
    }
    return completed(
      operationId,
      {
        proxy: proxy.kind,
        upstreamMode: proxy.upstream,
        routes: report.routes.map((o) => ({
          applicationId: o.applicationId,
          status: OUTCOME_STATUS[o.status],
          signatureHash: o.signatureHash,
          fqdns: o.fqdns,
          upstream: o.upstream,
          error: o.error ?? "",
        })),
        removedApplicationIds: report.removed,
      },
      startedAt,
    );
  }

  /** The engine's API socket as the CLI would find it now (DOCKER_HOST / CONTAINER_HOST, or its default). */
  #api(engine: string): EngineApi | undefined {
    const path = engineSocketPath(engine);
    if (path === undefined) return undefined;
    const key = `${engine} ${path}`;
    let api = this.#apis.get(key);
    if (api === undefined) {
      api = new EngineApi(engine, path);
      this.#apis.set(key, api);
    }
    return api;
  }

  #sync(syncer: RouteSyncer, job: RouteSyncJob, claim?: Promise<void>) {
    const engine =
      typeof this.containerEngine === "function"
        ? this.containerEngine()
        : selectEngine(this.containerEngine);
    const api = this.#api(engine.name);
    if (this.#view !== undefined && this.#view.api !== api) {
      this.#view.close();
      this.#view = undefined;
    }
    // Podman's events file, when it answers on this socket (libpod) and proves to be the one it reads.
    if (api !== undefined) this.#view ??= new ContainerView(api, podmanEventsLogPath());
    const check = new PortCheck(engine, this.proxy.upstream, api, this.#view);
    return syncCheckedRoutes(
      syncer,
      check,
      {
        routes: job.routes.map((r) => ({
          applicationId: r.applicationId,
          containerName: r.containerName,
          containerPort: r.containerPort,
          imageTag: r.imageTag,
          fqdns: r.fqdns,
        })),
        // proto3 cannot tell an empty list from none: a drain job (drain or undrain ids, no
        // known ids) removes nothing, where a plain job with none removes every other route.
        knownApplicationIds:
          job.knownApplicationIds.length === 0 &&
          job.drainApplicationIds.length + job.undrainApplicationIds.length > 0
            ? undefined
            : job.knownApplicationIds,
        remove: job.removeApplicationIds,
        drain: job.drainApplicationIds,
        undrain: job.undrainApplicationIds,
      },
      claim,
    );
  }
}

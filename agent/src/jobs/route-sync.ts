// RouteSyncJob (external deploy) → the reverse-proxy-sync library → a JobResult
// whose stdout is the JSON report the control plane reads (format in
// agent.proto, RouteSyncJob). The writer follows the agent's proxy setting; the
// route ledger lives in the state dir (routes.json) so drift is told apart from
// a first sync across agent restarts.
import { join } from "node:path";
import { type JobResult, JobStatus, type RouteSyncJob } from "@relayctl/proto";
import {
  CaddyWriter,
  NginxWriter,
  RouteLedger,
  RouteSyncer,
  type RouteWriter,
  TraefikWriter,
} from "@relayctl/reverse-proxy-sync";
import type { ProxyConfig } from "../config.js";
import { type EngineSetting, selectEngine } from "../engine/select.js";
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

function result(
  operationId: string,
  ok: boolean,
  stdout: string,
  stderr: string,
  startedAt: number,
): JobResult {
  return {
    operationId,
    status: ok ? JobStatus.JOB_STATUS_COMPLETED : JobStatus.JOB_STATUS_FAILED,
    exitCode: ok ? 0 : -1,
    stdout,
    stderr,
    durationMs: Date.now() - startedAt,
    error: ok ? "" : stderr,
  };
}

export class RouteSyncRunner {
  #syncer: Promise<RouteSyncer> | undefined;

  constructor(
    readonly proxy: ProxyConfig,
    readonly stateDir: string,
    /** Engine of the port check (port-check.ts) every route passes before it is written. */
    readonly containerEngine: EngineSetting = "auto",
  ) {}

  async run(operationId: string, job: RouteSyncJob): Promise<JobResult> {
    const startedAt = Date.now();
    const proxy = this.proxy;
    if (proxy.kind === "none") {
      const why =
        "this agent has no reverse proxy configured: set RELAYCTL_AGENT_PROXY to caddy, nginx or traefik";
      return result(operationId, false, "", why, startedAt);
    }
    // One syncer (and ledger) per process: jobs are serialised inside it.
    this.#syncer ??= RouteLedger.open(join(this.stateDir, "routes.json")).then(
      (ledger) => new RouteSyncer({ writer: writerFor(proxy), ledger, upstreamMode: proxy.upstream }),
    );
    const syncer = await this.#syncer;
    const deadlineMs = (job.deadlineSeconds || DEFAULT_DEADLINE_SECONDS) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), deadlineMs);
    });
    const report = await Promise.race([this.#sync(syncer, job), late]).finally(() => clearTimeout(timer));
    if (report === "late") {
      const why = `the ${proxy.kind} proxy did not take the routes within ${deadlineMs / 1000} s`;
      return result(operationId, false, "", why, startedAt);
    }
    const routes = report.routes.map((o) => ({
      application_id: o.applicationId,
      status: o.status,
      signature_hash: o.signatureHash,
      fqdns: o.fqdns,
      upstream: o.upstream,
      ...(o.error ? { error: o.error } : {}),
    }));
    const stdout = JSON.stringify({
      version: 1,
      proxy: proxy.kind,
      upstream_mode: proxy.upstream,
      routes,
      removed: report.removed,
    });
    const failures = routes
      .filter((r) => r.status === "failed")
      .map((r) => `${r.application_id}: ${r.error}`);
    return result(operationId, true, stdout, failures.join("\n"), startedAt);
  }

  #sync(syncer: RouteSyncer, job: RouteSyncJob) {
    const check = new PortCheck(selectEngine(this.containerEngine), this.proxy.upstream);
    return syncCheckedRoutes(syncer, check, {
      routes: job.routes.map((r) => ({
        applicationId: r.applicationId,
        containerName: r.containerName,
        containerPort: r.containerPort,
        imageTag: r.imageTag,
        fqdns: r.fqdns,
      })),
      knownApplicationIds: job.knownApplicationIds,
      remove: job.removeApplicationIds,
    });
  }
}

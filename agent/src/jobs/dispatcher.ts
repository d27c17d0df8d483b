// Job dispatch: what the agent does with Job and ResultAck messages, whoever
// carries them. Guarantees (DESIGN.md "Operations"):
// - an operation id is run at most once, across restarts (journal.ts); a
//   duplicate delivery is acked again and, if its result is still unacked, the
//   result is sent again;
// - a job is acked once its claim is durable; one that finishes within
//   ackAfterMs is acked by its result alone (the gateway takes a result as the
//   ack: one message fewer for every short command);
// - a result is sent at once and spooled to disk until ResultAck
//   (result-store.ts); all unacked results are re-sent after every Welcome;
// - a command keeps running while the stream is down; its result goes out on
//   the next stream.
// A LogsJob is a read, not an operation (logs.ts): none of the above applies to
// it, and it ends when the stream does.
import { performance } from "node:perf_hooks";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type AgentMessage, type Job, type JobResult, JobStatus } from "@relayctl/proto";
import type { DeployConfig, ProxyConfig } from "../config.js";
import { runCleanupJob } from "../containers/cleanup.js";
import { Deployer } from "../deploy/deployer.js";
import { unusableReason } from "../engine/choice.js";
import type { ContainerEngine } from "../engine/engine.js";
import { EngineMonitor } from "../engine/engine-monitor.js";
import type { EngineSetting } from "../engine/select.js";
import type { Logger } from "../log.js";
import type { CommandRunner } from "../runner/runner.js";
import { traceJob } from "../tracing/index.js";
import { runRegistryLoginJob, runRegistryLogoutJob, runRestartJob } from "./container.js";
import { failedResult, runExecJob } from "./exec.js";
import { Journal } from "./journal.js";
import { LogReaders } from "./logs.js";
import { runRebootCommand } from "./reboot.js";
import { RouteSyncRunner } from "./route-sync.js";
import { ResultStore } from "./result-store.js";

/** Where messages to the gateway go: the current stream, if any. */
export type Send = (message: AgentMessage) => void;

// Operation ids are UUIDs; anything else must not become a file name.
const OPERATION_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

export interface DispatcherOptions {
  stateDir: string;
  runner: CommandRunner;
  log: Logger;
  /** Container engine for restart and registry jobs. @default auto */
  containerEngine?: EngineSetting;
  /**
   * The engine decision, shared with the connection that reports it. @default a
   * monitor of containerEngine that probes when a job first needs the engine
   */
  engines?: EngineMonitor;
  /** Shell command of reboot jobs. @default systemctl reboot */
  rebootCommand?: string;
  /** Reverse proxy of route-sync jobs and of deployments' switch. @default none (route-sync jobs fail) */
  proxy?: ProxyConfig;
  /** Deployment settings. @default drain 5 s, no network, --init */
  deploy?: DeployConfig;
  /** Bytes of log kept per deployment step. @default 1 MiB */
  outputCapBytes?: number;
  /**
   * How long a claimed job may run before its JobAck goes out; one that finishes
   * sooner is acked by its JobResult. 0: every job is acked at once. @default 50
   */
  ackAfterMs?: number;
}

const ACK_AFTER_MS = 50;

/**
 * How long a result sent on a stream waits for its ResultAck before it is
 * spooled. The gateway acks once the result is stored in its database, most
 * often within a few ms: such a result never touches this disk (a spool file's
 * open, write, fsync, rename, directory fsync and unlink were a third of the
 * agent's CPU per exec). An agent killed meanwhile, unacked, reports the job
 * `failed` (outcome unknown) on restart, as one killed during the spool's
 * write always did; one already stored stays as stored (a finished operation
 * takes no second result).
 */
const SPOOL_AFTER_MS = 25;

export class Dispatcher {
  readonly #running = new Map<string, Promise<void>>();
  readonly #unacked = new Map<string, JobResult>();
  readonly #saving = new Set<string>();
  readonly #ackedWhileSaving = new Set<string>();
  /** Results sent and not yet spooled, waiting SPOOL_AFTER_MS for their ack: id → told of it. */
  readonly #awaitingAck = new Map<string, (acked: boolean) => void>();
  #send: Send | undefined;

  private constructor(
    readonly journal: Journal,
    readonly results: ResultStore,
    readonly runner: CommandRunner,
    readonly log: Logger,
    readonly containerEngine: EngineSetting,
    readonly engines: EngineMonitor,
    readonly rebootCommand: string,
    readonly routes: RouteSyncRunner,
    deploy: DeployConfig,
    stateDir: string,
    outputCapBytes: number | undefined,
    readonly ackAfterMs: number,
  ) {
    this.logs = new LogReaders(async () => {
      const d = await this.engines.forJob();
      return d.working === undefined ? unusableReason(d) : this.engines.engine(d.working);
    }, log);
    this.deployer = new Deployer({
      settings: { stateDir, ...deploy },
      target: { proxy: routes.proxy, syncer: () => routes.syncer() },
      engine: () => this.#engine(),
      engineProblem: () => this.#engineProblem(),
      // Progress goes out only while a stream is attached: it is best effort (agent.proto JobProgress).
      emit: (jobProgress) => this.#emit({ $case: "jobProgress", jobProgress }),
      logCapBytes: outputCapBytes,
      onError: (err) => this.log.error({ err }, "deployment pipeline error"),
    });
  }

  readonly deployer: Deployer;
  /** Container log reads (LogsJob): outside the journal, the running list and the deploy queue. */
  readonly logs: LogReaders;

  static async open(options: DispatcherOptions): Promise<Dispatcher> {
    await mkdir(options.stateDir, { recursive: true, mode: 0o700 });
    const results = new ResultStore(join(options.stateDir, "results"));
    await results.init();
    const journal = await Journal.open(join(options.stateDir, "journal.log"));
    const engines =
      options.engines ??
      new EngineMonitor({ setting: options.containerEngine ?? "auto", log: options.log, recheckMs: 0 });
    const dispatcher = new Dispatcher(
      journal,
      results,
      options.runner,
      options.log,
      options.containerEngine ?? "auto",
      engines,
      options.rebootCommand ?? "systemctl reboot",
      new RouteSyncRunner(options.proxy ?? { kind: "none", upstream: "host" }, options.stateDir, () =>
        engines.now(),
      ),
      options.deploy ?? { drainSeconds: 5, network: undefined, init: true },
      options.stateDir,
      options.outputCapBytes,
      options.ackAfterMs ?? ACK_AFTER_MS,
    );
    await dispatcher.#recoverInterrupted();
    return dispatcher;
  }

  /** Sends go to `send` from now on (a stream is up and welcomed). */
  attach(send: Send): void {
    this.#send = send;
  }

  /** The stream is gone: results wait on disk until the next attach + resendUnacked; log reads end. */
  detach(): void {
    this.#send = undefined;
    this.logs.cancelAll();
  }

  /** CancelJob: only a log read can be stopped (an operation runs to its end). */
  cancelJob(operationId: string): void {
    this.logs.cancel(operationId);
  }

  runningOperationIds(): string[] {
    return [...this.#running.keys()];
  }

  async handleJob(job: Job): Promise<void> {
    const id = job.operationId;
    if (!OPERATION_ID.test(id)) {
      this.log.warn({ operation_id: id }, "job with an invalid operation id ignored");
      return;
    }
    if (job.kind?.$case === "logs")
      return this.logs.run(id, job.kind.logs, (logsOutput) =>
        this.#emit({ $case: "logsOutput", logsOutput }),
      );
    if (this.journal.has(id)) return this.#duplicate(id);
    const run = traceJob(job, () => this.#run(job)).finally(() => this.#running.delete(id));
    this.#running.set(id, run);
    return run;
  }

  async handleResultAck(operationId: string): Promise<void> {
    if (!OPERATION_ID.test(operationId)) return;
    this.#unacked.delete(operationId);
    const waiting = this.#awaitingAck.get(operationId);
    // Acked before its spool write began: there is no file to remove.
    if (waiting) return waiting(true);
    if (this.#saving.has(operationId)) this.#ackedWhileSaving.add(operationId);
    await this.results.remove(operationId);
  }

  /** After every Welcome: results in memory (maybe still being spooled), then the spool. */
  async resendUnacked(): Promise<void> {
    for (const result of this.#unacked.values()) this.#emit({ $case: "jobResult", jobResult: result });
    for (const result of await this.results.list()) {
      if (!this.#unacked.has(result.operationId)) this.#emit({ $case: "jobResult", jobResult: result });
    }
  }

  /** Resolves when every job taken on so far has finished, deployments' retire included (shutdown, tests). */
  async idle(): Promise<void> {
    await Promise.allSettled([...this.#running.values()]);
    await this.deployer.idle();
  }

  async close(): Promise<void> {
    await this.journal.close();
  }

  async #duplicate(id: string): Promise<void> {
    // Never ack before the first delivery's claim is on disk (an acked job is never run twice).
    if (
      !(await this.journal.claimed(id).then(
        () => true,
        () => false,
      ))
    )
      return;
    this.log.info({ operation_id: id }, "duplicate job acked, not run again");
    this.#emit({ $case: "jobAck", jobAck: { operationId: id } });
    if (this.#running.has(id)) return; // its result is sent when it finishes
    const result = this.#unacked.get(id) ?? (await this.results.load(id));
    if (result) this.#emit({ $case: "jobResult", jobResult: result });
  }

  async #run(job: Job): Promise<void> {
    const id = job.operationId;
    // The API request that started the job names every line logged for it.
    const log = job.requestId ? this.log.child({ req_id: job.requestId.slice(0, 128) }) : this.log;
    const received = performance.now();
    const claim = this.journal.start(id); // durable before the ack: an acked job is never run twice
    // A route sync checks its ports and reads its proxy while the claim goes to disk: it
    // writes nothing before the claim is durable (port-check.ts), and nothing at all when
    // the claim fails (its result is then dropped, as the job is not acked).
    const early = job.kind?.$case === "routeSync" ? this.#execute(job, claim) : undefined;
    try {
      await claim;
    } catch (err) {
      this.journal.forget(id);
      log.error({ operation_id: id, err }, "cannot journal job; not acked");
      await early;
      return;
    }
    const claimed = performance.now();
    const ack = () => this.#emit({ $case: "jobAck", jobAck: { operationId: id } });
    // A reboot is acked before the machine goes down; a job that finishes before
    // ackAfterMs, by its result (a stream that drops first re-delivers the job, and
    // the journal makes that a duplicate: acked, never run again).
    const rebooting = job.kind?.$case === "reboot";
    const acking = rebooting || this.ackAfterMs <= 0 ? void ack() : setTimeout(ack, this.ackAfterMs);
    log.info({ operation_id: id, kind: job.kind?.$case }, "job started");
    if (rebooting) return this.#reboot(id);
    const result = await (early ?? this.#execute(job)).finally(() => clearTimeout(acking));
    const ran = performance.now();
    await this.#finish(result);
    // claim_ms: the journal's durable claim (group fdatasync) before the job may run;
    // run_ms: from the claim until the result is on the wire (the runner and the job kind).
    const ms = (from: number, to: number) => Math.round((to - from) * 100) / 100;
    log.info(
      {
        operation_id: id,
        status: result.status,
        exit_code: result.exitCode,
        claim_ms: ms(received, claimed),
        run_ms: ms(claimed, ran),
      },
      "job finished",
    );
  }

  /**
   * Marked done in the journal BEFORE the command: the machine going down must
   * not turn into an "outcome unknown" report on the next start, and a
   * redelivery after the reboot must never reboot again.
   */
  async #reboot(id: string): Promise<void> {
    await this.journal.done(id);
    const failed = await runRebootCommand(this.rebootCommand, id);
    if (!failed) {
      this.log.info({ operation_id: id }, "reboot command succeeded; going down");
      return;
    }
    await this.#finish(failed);
    this.log.warn({ operation_id: id, error: failed.error }, "reboot command failed");
  }

  /** `claim`: the job's durable claim, when the job may start before it is (a route sync's reads). */
  async #execute(job: Job, claim?: Promise<void>): Promise<JobResult> {
    try {
      switch (job.kind?.$case) {
        case "exec":
          return await runExecJob(this.runner, job.operationId, job.kind.exec, (logsOutput) =>
            this.#emit({ $case: "logsOutput", logsOutput }),
          );
        case "restart": {
          const d = await this.engines.forJob();
          if (d.working === undefined) return failedResult(job.operationId, unusableReason(d));
          const engine = this.engines.engine(d.working);
          return this.#watched(await runRestartJob(engine, job.operationId, job.kind.restart));
        }
        case "registryLogin": {
          // Login needs the CLI only (docker's writes its config without a daemon).
          const d = await this.engines.forJob();
          if (d.cli === undefined) return failedResult(job.operationId, unusableReason(d));
          return await runRegistryLoginJob(
            this.engines.engine(d.cli),
            job.operationId,
            job.kind.registryLogin,
          );
        }
        case "registryLogout":
          return await runRegistryLogoutJob(this.#engine(), job.operationId, job.kind.registryLogout);
        case "routeSync":
          return await this.routes.run(job.operationId, job.kind.routeSync, claim);
        case "deploy":
          return this.#watched(await this.deployer.run(job.operationId, job.kind.deploy));
        case "cleanup": {
          const d = await this.engines.forJob();
          if (d.working === undefined) return failedResult(job.operationId, unusableReason(d));
          const engine = this.engines.engine(d.working);
          const cleanup = job.kind.cleanup;
          // After the deployments received before it: one ending later would leave a container and a route.
          const ledger = await this.deployer.images();
          const removeRoute = (id: string) => this.#removeRoute(id);
          const run = () => runCleanupJob(engine, job.operationId, cleanup, removeRoute, ledger);
          const label = `the cleanup of the application (operation ${job.operationId})`;
          return this.#watched(await this.deployer.exclusive(cleanup.applicationId, label, run));
        }
        default:
          return failedResult(job.operationId, "unsupported job kind (agent too old?)");
      }
    } catch (err) {
      return failedResult(job.operationId, `agent error: ${(err as Error).message}`);
    }
  }

  /**
   * The wire first, then the spool: waiting for the disk before sending would put
   * two fsyncs on the path of every command. The spool still catches every result
   * the gateway does not ack (stream down, gateway lost it). An agent killed in
   * the instant between the two reports the job `failed` (outcome unknown) on
   * restart, unless the gateway already stored the result.
   */
  async #finish(result: JobResult): Promise<void> {
    const id = result.operationId;
    // Kept in memory too until acked: a stream that comes up while the spool
    // write is in flight must still get it (resendUnacked).
    this.#unacked.set(id, result);
    // Listened for before the send: an ack may come back at once.
    const acked = this.#ackWithin(id, SPOOL_AFTER_MS);
    if (!this.#emit({ $case: "jobResult", jobResult: result })) this.#awaitingAck.get(id)?.(false);
    if (await acked) {
      // Stored by the gateway: nothing to keep. The done record rides on the journal's next
      // write; lost in a crash, the job is reported again and the stored result stays.
      this.journal.doneLater(id);
      return;
    }
    this.#saving.add(id);
    try {
      await this.results.save(result);
      await this.journal.done(id);
      // Acked while it was being written: nothing left to re-send.
      if (this.#ackedWhileSaving.delete(id)) await this.results.remove(id);
    } catch (err) {
      this.log.error({ operation_id: id, err }, "cannot spool result; it was sent once");
    } finally {
      this.#saving.delete(id);
      this.#ackedWhileSaving.delete(id);
    }
  }

  /** A job the agent was running when it stopped has no known outcome: report it failed. */
  async #recoverInterrupted(): Promise<void> {
    for (const id of this.journal.unfinished()) {
      if (!(await this.results.load(id))) {
        await this.results.save(
          failedResult(id, "the agent stopped while the command was running; outcome unknown"),
        );
      }
      await this.journal.done(id);
    }
  }

  #engine(): ContainerEngine {
    return this.engines.now();
  }

  /** Why a deployment cannot run (no working engine), checked before its first step. */
  async #engineProblem(): Promise<string | undefined> {
    const d = await this.engines.forJob();
    return d.working === undefined ? unusableReason(d) : undefined;
  }

  /**
   * A restart whose engine could not run or hung, or a deployment that failed
   * in a step the engine does (build, start), may mean the engine went away: it
   * is probed again in the background. A restart that exited non-zero is the
   * container's answer (no such container), not the engine's failure.
   */
  /** A cleanup's route removal: a line for its output; "" when there was none or no proxy. */
  async #removeRoute(applicationId: string): Promise<string> {
    const pending = this.routes.syncer();
    if (this.routes.proxy.kind === "none" || pending === undefined) return "";
    const report = await (await pending).sync({ routes: [], remove: [applicationId] });
    return report.removed.length > 0
      ? `removed the application's route from the ${this.routes.proxy.kind} proxy`
      : "";
  }

  #watched(result: JobResult): JobResult {
    const step = result.detail?.$case === "deploy" ? result.detail.deploy.failedStep : undefined;
    const engineStep = step === "build" || step === "start";
    if (engineStep || (step === undefined && result.status !== JobStatus.JOB_STATUS_COMPLETED))
      this.engines.engineFailed();
    return result;
  }

  /** Whether the result's ResultAck comes within `ms` (the waiter called with false: it will not). */
  #ackWithin(id: string, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const settle = (acked: boolean) => {
        clearTimeout(timer);
        this.#awaitingAck.delete(id);
        resolve(acked);
      };
      const timer = setTimeout(() => settle(false), ms);
      this.#awaitingAck.set(id, settle);
    });
  }

  /** False when no stream is attached (nothing was sent). */
  #emit(msg: AgentMessage["msg"]): boolean {
    if (!this.#send) return false;
    this.#send({ msg });
    return true;
  }
}

// Starting a deployment and seeing it onto its agent. A request records the
// operation (type `deploy`), its audit event and the deployment row in one
// transaction, answers at once, and leaves a driver here to:
//   1. wait for its turn: deployments of one application on one server run one
//      at a time, in request order (deployments.seq), so it waits for every
//      earlier one of the application on that server to finish (a fleet's
//      rollout, fleets/rollouts.ts, runs one per server at once);
//   2. hand the job to the agent, waiting for the agent to connect when it is
//      not (a deploy waits until its deadline; exec and the others refuse);
//   3. then the agent runs it and its result finishes the operation like any
//      other (gateway → operations service).
// The job carries secrets (env values, credentials) that are never stored, so
// it lives only in this driver's memory until it is on the stream: a control
// plane that stops first fails the deployment rather than leaving it queued.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { AppsUrl } from "../applications/app-url.js";
import type { ApplicationRow } from "../applications/store.js";
import type { JobBus } from "../bus/job-bus.js";
import type { ServerRef, StartSpec, StartedOperation } from "../operations/outcome.js";
import type { OperationService } from "../operations/service.js";
import { startLease } from "../operations/store.js";
import { buildDeployJob, buildRollbackJob, type JobWithoutDeadline } from "./job.js";
import type { RollbackTarget } from "./releases.js";
import {
  type DeploymentActor,
  type Trigger,
  QUEUE_SEQ,
  insertDeployment,
  markDispatched,
  recordQueueLine,
  recordReport,
} from "./store.js";

export interface DeployRequest {
  tenantId: string;
  app: ApplicationRow;
  server: ServerRef;
  commitRef: string | undefined;
  /** Applied to this deployment only; never stored (audited by name). */
  envOverrides: Record<string, string>;
  timeoutSeconds: number;
  runId: string | null;
  trigger: Trigger;
  actor: DeploymentActor;
  keyId: string | null;
  /** Caller fields of the audit event (key, ip, run_context...). */
  audit: Record<string, unknown>;
  /** A rollback: the release to start again (releases.ts rollbackTarget); nothing is built. */
  rollback?: RollbackTarget;
  /** The container's limits (a preview's settings); absent: none. */
  limits?: { memoryMb: number | null; cpus: number | null };
  /**
   * The deployment's id, chosen by the caller before it starts (a rollout names
   * each server's deployment when it is created, fleets/rollouts.ts); absent: a new one.
   */
  deploymentId?: string;
}

/**
 * Supplies a git credential minted for one deployment (the GitHub App's
 * installation token), or undefined to use the application's stored one; throws
 * RC_ERR_NOT_DEPLOYABLE when the application's source cannot be reached.
 */
export type SourceCredentialHook = (
  app: ApplicationRow,
) => Promise<{ username: string; password: string } | undefined>;

export interface Deployment {
  operationId: string;
  deploymentId: string;
}

/** Retry cadence while the agent is not connected. */
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 2_000;
/** Longest wait on an earlier deployment's done event before looking at the table again. */
const TURN_RECHECK_MS = 5_000;

export class DeployService {
  readonly #drivers = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  /** Drivers of this process by deployment id: cancelled before dispatch, or dispatching now. */
  readonly #local = new Map<string, { cancelled: boolean; dispatching: boolean }>();
  readonly #sourceCredentials: SourceCredentialHook[] = [];

  constructor(
    readonly db: Knex,
    readonly bus: JobBus,
    readonly ops: OperationService,
    readonly log: Logger,
    readonly masterKey: Buffer | undefined,
    readonly leaseMs: number,
    /** RELAYCTL_APPS_URL: gives the route the application's default hostname. */
    readonly appsUrl?: AppsUrl,
  ) {
    // A deployment's steps and commit land with its operation's final state, never apart.
    ops.onCompletion("deploy", async (trx, id, detail) => {
      if (detail.$case === "deploy") await recordReport(trx, id, detail.deploy);
    });
  }

  /**
   * Set at boot by each forge integration (GitHub, GitLab/Gitea: serve.ts); an
   * application is linked to one forge at most, so the first credential given wins.
   */
  useSourceCredentials(hook: SourceCredentialHook): void {
    this.#sourceCredentials.push(hook);
  }

  async #sourceCredential(app: ApplicationRow) {
    for (const hook of this.#sourceCredentials) {
      const c = await hook(app);
      if (c) return c;
    }
    return undefined;
  }

  async request(r: DeployRequest): Promise<Deployment> {
    const deploymentId = r.deploymentId ?? randomUUID();
    const release = r.rollback?.release;
    const commitRef = release
      ? (release.commit_sha ?? release.commit_ref)
      : (r.commitRef ?? r.app.deploy_branch);
    // Opened before anything is recorded: a secret that cannot be read is the caller's error now.
    const { job, record, rollbackOf } = r.rollback
      ? await buildRollbackJob(this.db, this.masterKey, r.app, r.rollback, deploymentId, this.appsUrl)
      : await buildDeployJob(
          this.db,
          this.masterKey,
          r.app,
          deploymentId,
          commitRef,
          r.envOverrides,
          await this.#sourceCredential(r.app),
          this.appsUrl,
        );
    if (r.limits)
      job.limits = {
        memoryBytes: (r.limits.memoryMb ?? 0) * 1024 * 1024,
        cpuMillis: Math.round((r.limits.cpus ?? 0) * 1000),
      };
    const deadlineAt = Date.now() + r.timeoutSeconds * 1000;
    const spec: StartSpec = {
      tenantId: r.tenantId,
      server: r.server,
      operationType: "deploy",
      keyId: r.keyId,
      runId: r.runId,
      deadlineSeconds: r.timeoutSeconds,
      // Leased once on the agent's stream: waiting for its turn is not "agent lost".
      leased: false,
      audit: {
        ...r.audit,
        application_id: r.app.id,
        application_name: r.app.name,
        deployment_id: deploymentId,
        commit_ref: commitRef,
        env_override_keys: Object.keys(r.envOverrides).sort(),
        timeout_seconds: r.timeoutSeconds,
        trigger: r.trigger,
        ...(rollbackOf
          ? {
              rollback_of: rollbackOf,
              image: job.build?.$case === "release" ? job.build.release.image : null,
            }
          : {}),
        config_hash: record.config_hash,
      },
      together: (trx, operationId, now) => [
        insertDeployment(
          trx,
          {
            id: deploymentId,
            tenantId: r.tenantId,
            applicationId: r.app.id,
            serverId: r.server.id,
            trigger: r.trigger,
            actor: r.actor,
            commitRef,
            record,
            rollbackOf: release,
          },
          operationId,
          now,
        ),
      ],
    };
    const op = await this.ops.start(spec);
    this.#local.set(deploymentId, { cancelled: false, dispatching: false });
    const driver = this.#drive(op, deploymentId, r.app.id, job, deadlineAt)
      .catch((err) => this.log.error({ err, operation_id: op.id }, "deployment driver failed"))
      .finally(() => {
        this.#drivers.delete(driver);
        this.#local.delete(deploymentId);
      });
    this.#drivers.add(driver);
    return { operationId: op.id, deploymentId };
  }

  /**
   * Ends a deployment that has not reached its agent yet (waiting for its turn
   * or for the agent), failing its operation with `reason`; false when it is
   * already on the agent or finished. Used to supersede a queued push deploy by
   * a newer one. A driver of this process checks the mark before every
   * dispatch, and one that is dispatching right now is not cancelled; a driver
   * of another instance sees the operation finished before its next dispatch.
   */
  async cancelQueued(deploymentId: string, reason: string): Promise<boolean> {
    const row = await this.db("deployments")
      .where({ id: deploymentId })
      .whereNull("dispatched_at")
      .first<{ operation_id: string } | undefined>("operation_id");
    if (!row) return false;
    // Checked and marked with no await between, as the driver does the reverse.
    const local = this.#local.get(deploymentId);
    if (local?.dispatching) return false;
    if (local) local.cancelled = true;
    return this.ops.fail(row.operation_id, "failed", reason);
  }

  /** Stops every driver; deployments not yet on their agent's stream are failed. */
  async close(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled([...this.#drivers]);
  }

  async #drive(
    op: StartedOperation,
    deploymentId: string,
    applicationId: string,
    job: JobWithoutDeadline,
    deadlineAt: number,
  ): Promise<void> {
    const end = (status: "failed" | "timeout", why: string) =>
      this.ops.fail(op.id, status, why, Date.now() - op.startedAt);
    try {
      if (!(await this.#waitTurn(op.id, deploymentId, applicationId, deadlineAt)))
        return void (await end(
          "timeout",
          "deadline passed while an earlier deployment of the application was running",
        ));
      const kind = { $case: "deploy" as const, deploy: { ...job, deadlineUnixMs: deadlineAt } };
      const local = this.#local.get(deploymentId);
      let delay = RETRY_MIN_MS;
      for (;;) {
        if (!(await this.#stillRunning(op.id))) return;
        // Checked and marked with no await between (see cancelQueued); once on
        // the stream it stays "dispatching": it can no longer be cancelled.
        if (local?.cancelled) return;
        if (local) local.dispatching = true;
        const d = await this.ops.dispatch(op, kind, { awaitResult: false, retryNotRun: true });
        if (d.state !== "not_run") {
          await markDispatched(this.db, deploymentId);
          await startLease(this.db, op.id, this.leaseMs);
          return;
        }
        if (local) local.dispatching = false;
        if (deadlineAt - Date.now() <= delay)
          return void (await end("timeout", `deadline passed: ${d.reason}`));
        await sleep(delay, undefined, { signal: this.#stop.signal });
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    } catch (err) {
      if (this.#stop.signal.aborted) {
        await end("failed", "the control plane stopped before the deployment reached its agent").catch(
          () => {},
        );
        return;
      }
      await end("failed", "the deployment could not be handed to its agent").catch(() => {});
      throw err;
    }
  }

  /** False once the operation was finished by someone else (cancelled, swept). */
  async #stillRunning(operationId: string): Promise<boolean> {
    return Boolean(await this.db("operations").where({ id: operationId, status: "running" }).first("id"));
  }

  /**
   * True once no earlier deployment of the application is running; false at the
   * deadline. A wait shows in the deployment's log as a `queue` step, with times:
   * which deployment it waits for, then how long it waited.
   */
  async #waitTurn(
    operationId: string,
    deploymentId: string,
    applicationId: string,
    deadlineAt: number,
  ): Promise<boolean> {
    // Stored, then announced: the deployment's live log reads the line now.
    const line = async (
      seq: (typeof QUEUE_SEQ)[keyof typeof QUEUE_SEQ],
      status: "running" | "succeeded" | "failed",
      text: string,
    ) => {
      await recordQueueLine(this.db, deploymentId, seq, status, text);
      this.bus.publishProgress(operationId);
    };
    const mine = await this.db("deployments")
      .where({ id: deploymentId })
      .first<{ seq: number; server_id: string }>("seq", "server_id");
    const since = Date.now();
    let waitedFor: string | undefined;
    for (;;) {
      const earlier = await this.db("deployments as d")
        .join("operations as o", "o.id", "d.operation_id")
        // Per server: a fleet's rollout runs one deployment on each of its servers at once.
        .where({ "d.application_id": applicationId, "d.server_id": mine!.server_id, "o.status": "running" })
        .andWhere("d.seq", "<", Number(mine!.seq))
        .orderBy("d.seq", "desc")
        .first<{ operation_id: string; id: string } | undefined>("d.operation_id", "d.id");
      if (!earlier) {
        if (waitedFor !== undefined) {
          const waited = ((Date.now() - since) / 1000).toFixed(1);
          await line(QUEUE_SEQ.ended, "succeeded", `deployment ${waitedFor} finished; waited ${waited} s`);
        }
        return true;
      }
      if (waitedFor === undefined) {
        waitedFor = earlier.id;
        await line(QUEUE_SEQ.waiting, "running", `waiting for deployment ${earlier.id} to finish`);
      }
      const left = deadlineAt - Date.now();
      if (left <= 0) {
        await line(QUEUE_SEQ.ended, "failed", `deadline passed while waiting for deployment ${earlier.id}`);
        return false;
      }
      await this.#awaitFinish(earlier.operation_id, Math.min(left, TURN_RECHECK_MS));
    }
  }

  /** Its done event, or `ms`, whichever is first; the table is the truth either way. */
  async #awaitFinish(operationId: string, ms: number): Promise<void> {
    const waiter = await this.bus.awaitDone(operationId).catch(() => undefined);
    try {
      // Subscribed first, then looked: a finish in between is not waited out.
      const running = await this.db("operations").where({ id: operationId, status: "running" }).first("id");
      if (!running) return;
      await Promise.race([
        waiter?.done ?? new Promise(() => {}),
        sleep(ms, undefined, { signal: this.#stop.signal }),
      ]);
    } finally {
      waiter?.cancel();
    }
  }
}

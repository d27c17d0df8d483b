// A rollout (issue 33): a deploy or rollback of a fleet application, one
// deployment per target server through DeployService.request, in batches
// (strategy.ts). The rollout is an operation of its own (type deploy, on its
// first server, no deployment row) that completes when the rollout does: its
// stdout lists each server's outcome, its stderr the servers and steps that
// failed. When failures pass max_failures the rollout halts: no new batch
// starts, the servers it already switched go back to their previous release
// (auto_rollback), the rest are left untouched (skipped).
//
// The driver lives in the api instance that took the request, like a
// deployment's (deployments/service.ts): the per-server jobs carry secrets that
// are never stored. An instance that stops fails its rollouts (deployments on
// their agents finish on their own); one that dies leaves the operation to the
// sweeper at its deadline, and the next rollout of the application releases the
// stale claim (store.ts).
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { ApplicationRow } from "../applications/store.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import type { JobBus } from "../bus/job-bus.js";
import { rollbackTarget } from "../deployments/releases.js";
import type { DeployRequest, DeployService } from "../deployments/service.js";
import type { OperationService } from "../operations/service.js";
import type { ServerRef } from "../servers/servers.js";
import {
  type ServerState,
  claimRollout,
  dropClaim,
  finishRollout,
  rolloutRows,
  setServerState,
} from "./store.js";
import { setDraining } from "./drain.js";
import { keepOnTargets, releaseLeavers } from "./moves.js";
import { type Strategy, batchesOf } from "./strategy.js";

/** Room after the last batch's deadline for the rollbacks of a halt. */
const ROLLBACK_ROOM_MS = 120_000;
const RECHECK_MS = 5_000;

export interface RolloutRequest {
  app: ApplicationRow;
  targets: ServerRef[];
  strategy: Strategy;
  kind: "deploy" | "rollback";
  /** What every server's deployment shares (DeployRequest without app, server and rollback). */
  base: Omit<DeployRequest, "app" | "server" | "rollback">;
}

export interface RolloutStarted {
  rolloutId: string;
  operationId: string;
  /** The first server's deployment. */
  deploymentId: string;
}

interface Target {
  server: ServerRef;
  /** Its deployment's id, chosen when the rollout is created (its rollout_servers row has it). */
  plannedId: string;
  operationId?: string;
  /** Set once that deployment started. */
  deploymentId?: string;
  state: ServerState;
  failedStep?: string | null;
  detail?: string;
  /** Marked draining on its proxy by this rollout, until its deployment ends. */
  drained?: boolean;
}

interface Run {
  id: string;
  operationId: string;
  req: RolloutRequest;
  runId: string;
  targets: Target[];
  batches: number[][];
  startedAt: number;
}

const firstLine = (s: string) => (s.split("\n").find((l) => l.trim() !== "") ?? "").slice(0, 500);

export class RolloutService {
  readonly #drivers = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  /**
   * Told the application's id once one of its rollouts ended (not when this instance stops):
   * a push that waited for it is rolled out next (webhooks/push-queue.ts; serve.ts sets it).
   */
  onEnded: ((applicationId: string) => Promise<void>) | undefined;

  constructor(
    readonly db: Knex,
    readonly bus: JobBus,
    readonly ops: OperationService,
    readonly deploys: DeployService,
    readonly log: Logger,
  ) {}

  /**
   * Records the rollout and its operation, starts the first batch's
   * deployments (so the answer names the first one) and leaves the driver to
   * run the rest. 409 when a rollout of the application is running.
   */
  async start(req: RolloutRequest): Promise<RolloutStarted> {
    const { app, targets, strategy, base } = req;
    const id = randomUUID();
    const batches = batchesOf(strategy, targets.length);
    const batchOf: number[] = [];
    batches.forEach((b, i) => {
      for (const p of b) batchOf[p] = i;
    });
    const now = Date.now();
    const perBatchMs = (base.timeoutSeconds + strategy.pause_seconds + (strategy.drain_seconds ?? 0)) * 1000;
    const deadlineAt = now + perBatchMs * batches.length;
    const runId = base.runId ?? id;
    const plannedIds = targets.map(() => randomUUID());
    await claimRollout(
      this.db,
      {
        id,
        tenant_id: base.tenantId,
        application_id: app.id,
        kind: req.kind,
        strategy: JSON.stringify(strategy),
        run_id: runId,
        deadline_at: deadlineAt,
        created_at: now,
      },
      strategy,
    );
    let op: Awaited<ReturnType<OperationService["start"]>>;
    try {
      op = await this.ops.start({
        tenantId: base.tenantId,
        server: targets[0]!,
        operationType: "deploy",
        keyId: base.keyId,
        runId,
        deadlineSeconds: Math.ceil((deadlineAt - now + ROLLBACK_ROOM_MS) / 1000),
        leased: false,
        audit: {
          ...base.audit,
          run_id: runId,
          rollout_id: id,
          rollout_kind: req.kind,
          application_id: app.id,
          application_name: app.name,
          strategy,
          servers: targets.map((s) => s.name),
          trigger: base.trigger,
        },
        together: (trx, operationId, at) =>
          rolloutRows(trx, id, operationId, targets, batchOf, plannedIds, at),
      });
    } catch (err) {
      await dropClaim(this.db, id).catch(() => {});
      throw err;
    }
    await this.#audit(base.tenantId, "rollout.started", {
      rollout_id: id,
      operation_id: op.id,
      application_id: app.id,
      application_name: app.name,
      kind: req.kind,
      strategy,
      servers: targets.map((s) => ({ id: s.id, name: s.name })),
      ...base.audit,
    });
    const run: Run = {
      id,
      operationId: op.id,
      req,
      runId,
      batches,
      startedAt: op.startedAt,
      targets: targets.map((server, i) => ({ server, plannedId: plannedIds[i]!, state: "pending" })),
    };
    await keepOnTargets(this.db, app.id, targets);
    // With a drain the first deployment starts only after drain_seconds: the driver
    // launches every batch, and the answer names the id that deployment will have.
    const first = strategy.drain_seconds ? [] : await this.#launch(run, batches[0]!);
    const driver = this.#drive(run, first)
      .catch((err) => this.log.error({ err, rollout_id: id }, "rollout driver failed"))
      .finally(() => this.#drivers.delete(driver));
    this.#drivers.add(driver);
    // Position 0 is always in the first batch (batchesOf).
    return { rolloutId: id, operationId: op.id, deploymentId: run.targets[0]!.plannedId };
  }

  /** Stops every driver; their rollouts end failed (deployments on agents finish on their own). */
  async close(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled([...this.#drivers]);
  }

  async #drive(run: Run, first: Target[]): Promise<void> {
    const { strategy } = run.req;
    try {
      let failures = 0;
      let halted = false;
      for (let b = 0; b < run.batches.length; b++) {
        const launched =
          b === 0 && !strategy.drain_seconds ? first : await this.#launch(run, run.batches[b]!);
        await Promise.all(launched.map((t) => this.#settle(run, t)));
        failures += launched.filter((t) => t.state === "failed").length;
        if (failures > strategy.max_failures) {
          halted = true;
          break;
        }
        if (strategy.pause_seconds > 0 && b < run.batches.length - 1)
          await sleep(strategy.pause_seconds * 1000, undefined, { signal: this.#stop.signal });
      }
      if (halted) await this.#halt(run);
      // The placement moved: servers that left it give the application up (moves.ts).
      const { app, targets } = run.req;
      const left = halted ? [] : await releaseLeavers(this.db, this.ops, this.log, app, targets, run.id);
      await this.#finish(run, halted ? "halted" : "succeeded", undefined, left);
    } catch (err) {
      const why = this.#stop.signal.aborted
        ? "the control plane stopped during the rollout (deployments already on their agents finish on their own)"
        : "the rollout driver failed";
      await this.#finish(run, "failed", why).catch(() => {});
      if (!this.#stop.signal.aborted) throw err;
    } finally {
      // A driver that failed or stopped mid-batch still gives back the servers it drained.
      await Promise.all(run.targets.filter((t) => t.drained).map((t) => this.#drain(run, t, false)));
      if (!this.#stop.signal.aborted)
        await this.onEnded?.(run.req.app.id).catch((err) =>
          this.log.warn({ err, rollout_id: run.id }, "what waited for the rollout was not started"),
        );
    }
  }

  /** Starts the deployments of one batch; a server whose deployment cannot start fails here. */
  async #launch(run: Run, positions: number[]): Promise<Target[]> {
    const { app, base, kind, strategy } = run.req;
    if (strategy.drain_seconds) {
      // Every server of the batch drains at once, then the load balancer has drain_seconds to see it.
      const drained = await Promise.all(positions.map((p) => this.#drain(run, run.targets[p]!, true)));
      if (drained.some(Boolean))
        await sleep(strategy.drain_seconds * 1000, undefined, { signal: this.#stop.signal });
    }
    return Promise.all(
      positions.map(async (p) => {
        const t = run.targets[p]!;
        const onServer = { ...app, server_id: t.server.id };
        try {
          const rollback =
            kind === "rollback" ? await rollbackTarget(this.db, onServer, undefined) : undefined;
          const d = await this.deploys.request({
            ...base,
            deploymentId: t.plannedId,
            app: onServer,
            server: t.server,
            runId: run.runId,
            audit: { ...base.audit, run_id: run.runId, rollout_id: run.id },
            rollback,
          });
          Object.assign(t, { state: "deploying", operationId: d.operationId, deploymentId: d.deploymentId });
          await setServerState(this.db, run.id, t.server.id, {
            state: "deploying",
            deployment_id: d.deploymentId,
          });
        } catch (err) {
          if (this.#stop.signal.aborted) throw err;
          Object.assign(t, { state: "failed", failedStep: "start", detail: (err as Error).message });
          await this.#drain(run, t, false);
          await setServerState(this.db, run.id, t.server.id, {
            state: "failed",
            failed_step: "start",
            detail: t.detail!,
          });
        }
        return t;
      }),
    );
  }

  /** Waits for a launched server's deployment and records its outcome. */
  async #settle(run: Run, t: Target): Promise<void> {
    if (!t.operationId) return;
    const end = await this.#awaitOperation(t.operationId);
    // Its new release is live, or its old one still is: the load balancer may send traffic again.
    await this.#drain(run, t, false);
    if (end.status === "completed" && Number(end.exit_code) === 0) {
      t.state = "succeeded";
      await setServerState(this.db, run.id, t.server.id, { state: "succeeded" });
      return;
    }
    const dep = await this.db("deployments")
      .where({ id: t.deploymentId })
      .first<{ failed_step: string | null } | undefined>("failed_step");
    t.state = "failed";
    t.failedStep = dep?.failed_step ?? (end.status === "timeout" ? "deadline" : null);
    t.detail = `${end.status}: ${firstLine(end.stderr ?? "") || "no detail"}`;
    await setServerState(this.db, run.id, t.server.id, {
      state: "failed",
      failed_step: t.failedStep,
      detail: t.detail,
    });
  }

  /** A halt: the servers this rollout switched go back (auto_rollback); the pending ones are skipped. */
  async #halt(run: Run): Promise<void> {
    const { app, base, strategy } = run.req;
    for (const t of run.targets.filter((x) => x.state === "pending")) {
      t.state = "skipped";
      await setServerState(this.db, run.id, t.server.id, { state: "skipped" });
    }
    if (!strategy.auto_rollback) return;
    await Promise.all(
      run.targets
        .filter((t) => t.state === "succeeded")
        .map(async (t) => {
          const onServer = { ...app, server_id: t.server.id };
          try {
            const rollback = await rollbackTarget(this.db, onServer, undefined);
            t.state = "rolling_back";
            const d = await this.deploys.request({
              ...base,
              commitRef: undefined,
              envOverrides: {},
              app: onServer,
              server: t.server,
              runId: run.runId,
              audit: { ...base.audit, run_id: run.runId, rollout_id: run.id, rollout_halted: true },
              rollback,
            });
            await setServerState(this.db, run.id, t.server.id, {
              state: "rolling_back",
              rollback_deployment_id: d.deploymentId,
            });
            const end = await this.#awaitOperation(d.operationId);
            const ok = end.status === "completed" && Number(end.exit_code) === 0;
            t.state = ok ? "rolled_back" : "rollback_failed";
            t.detail = ok
              ? `rolled back to release ${rollback.release.id}`
              : `rollback ${end.status}: ${firstLine(end.stderr ?? "")}`;
          } catch (err) {
            if (this.#stop.signal.aborted) throw err;
            t.state = "rollback_failed";
            t.detail = `rollback not started: ${(err as Error).message}`;
          }
          await setServerState(this.db, run.id, t.server.id, { state: t.state, detail: t.detail });
        }),
    );
  }

  /** Ends the rollout, then its operation: what each server did, and which failed at which step. */
  async #finish(
    run: Run,
    status: "succeeded" | "halted" | "failed",
    why?: string,
    left: ServerRef[] = [],
  ): Promise<void> {
    const failed = run.targets.filter((t) => t.state === "failed" || t.state === "rollback_failed");
    const stdout = run.targets
      .map((t) => `${t.server.name}: ${t.state}${t.deploymentId ? ` (deployment ${t.deploymentId})` : ""}`)
      .concat(left.map((s) => `${s.name}: left the placement (cleanup requested)`))
      .join("\n");
    const failedLines = failed.map(
      (t) =>
        `server '${t.server.name}' ${t.state}${t.failedStep ? ` at step ${t.failedStep}` : ""}: ${t.detail ?? ""}`,
    );
    const detail =
      why ??
      (status === "halted"
        ? `halted: ${failed.length} server(s) failed, more than max_failures ${run.req.strategy.max_failures}`
        : `${run.targets.length - failed.length} of ${run.targets.length} server(s) deployed`);
    await finishRollout(
      this.db,
      { id: run.id, tenant_id: run.req.base.tenantId, application_id: run.req.app.id },
      status,
      detail,
      {
        operation_id: run.operationId,
        failed: failed.map((t) => ({
          server: t.server.name,
          step: t.failedStep ?? null,
          detail: t.detail ?? "",
        })),
        left_placement: left.map((s) => s.name),
      },
    );
    const stderr = [detail, ...failedLines].join("\n");
    await this.ops.complete(run.operationId, {
      status: status === "succeeded" ? "completed" : "failed",
      exit_code: status === "succeeded" ? (failed.length > 0 ? 1 : 0) : -1,
      stdout,
      stderr: status === "succeeded" && failed.length === 0 ? "" : stderr,
      duration_ms: Date.now() - run.startedAt,
      error: status === "succeeded" ? null : detail,
    });
  }

  /** Marks the application draining (or live again) on a target's proxy; false when it did not take. */
  async #drain(run: Run, t: Target, draining: boolean): Promise<boolean> {
    if (draining === Boolean(t.drained)) return draining;
    const { app, base } = run.req;
    const ok = await setDraining(this.ops, this.log, {
      tenantId: base.tenantId,
      server: t.server,
      keyId: base.keyId,
      runId: run.runId,
      rolloutId: run.id,
      applicationId: app.id,
      draining,
    });
    if (ok || !draining) t.drained = draining && ok;
    return ok;
  }

  async #audit(tenantId: string, eventType: string, payload: Record<string, unknown>): Promise<void> {
    await this.db.transaction((trx) => appendAuditEvent(trx, { tenantId, eventType, payload }));
  }

  /** The operation's final row: its done event or a recheck of the table, whichever is first. */
  async #awaitOperation(
    operationId: string,
  ): Promise<{ status: string; exit_code: number | null; stderr: string | null }> {
    for (;;) {
      const waiter = await this.bus.awaitDone(operationId).catch(() => undefined);
      try {
        const row = await this.db("operations")
          .where({ id: operationId })
          .first<{ status: string; exit_code: number | null; stderr: string | null }>(
            "status",
            "exit_code",
            "stderr",
          );
        if (row && row.status !== "running") return row;
        await Promise.race([
          waiter?.done ?? new Promise(() => {}),
          sleep(RECHECK_MS, undefined, { signal: this.#stop.signal }),
        ]);
      } finally {
        waiter?.cancel();
      }
    }
  }
}

// Works off the stored deliveries in the background (api role): claims the
// oldest one, acts on it by event, records what it did (shown to the tenant and
// audited in its chain), then reports commit statuses that changed. It wakes
// when the webhook route records a delivery and, failing that, every second, so
// deliveries recorded by another instance or before a restart are taken up.
// One delivery at a time per process keeps pushes in the order they arrived,
// which is what lets a newer push supersede a queued older one.
import { setTimeout as sleep } from "node:timers/promises";
import type { GitHubContext, Payload } from "./context.js";
import {
  type DeliveryRow,
  MAX_ATTEMPTS,
  auditDelivery,
  type Outcome,
  claimNext,
  finishDelivery,
  payloadText,
  retryLater,
} from "./deliveries.js";
import { installationEvent, installationRepositoriesEvent, repositoryEvent } from "./installations.js";
import { pullRequestEvent } from "./pull-request.js";
import { pushEvent } from "./push.js";
import { reportStatuses } from "./statuses.js";

const IDLE_MS = 1000;

type Handled = { outcome: Outcome; tenantId: string | null };

export class DeliveryProcessor {
  readonly #stop = new AbortController();
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;

  constructor(readonly ctx: GitHubContext) {}

  start(): void {
    this.#loop ??= this.#run();
  }

  /** A delivery was recorded: look now rather than at the next tick. */
  nudge(): void {
    this.#wake?.();
  }

  async close(): Promise<void> {
    this.#stop.abort();
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      let busy = false;
      try {
        busy = await this.processOne();
        await reportStatuses(this.ctx);
      } catch (err) {
        this.ctx.log.error({ err }, "github delivery processing failed");
      }
      if (busy || this.#stop.signal.aborted) continue;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        sleep(IDLE_MS, undefined, { signal: this.#stop.signal }).then(resolve, resolve);
      });
      this.#wake = undefined;
    }
  }

  /** Processes the next delivery; false when there was none. */
  async processOne(): Promise<boolean> {
    const d = await claimNext(this.ctx.db);
    if (!d) return false;
    let handled: Handled;
    try {
      handled = await this.#handle(d);
    } catch (err) {
      const last = Number(d.attempts) >= MAX_ATTEMPTS;
      this.ctx.log.warn(
        { err, delivery_id: d.id, attempt: Number(d.attempts) },
        last ? "github delivery failed; given up" : "github delivery failed; retried later",
      );
      const outcome = {
        result: "error",
        detail: `processing failed (attempt ${d.attempts} of ${MAX_ATTEMPTS}${last ? ", given up" : ", retried later"}): ${(err as Error).message}`,
      };
      // A delivery that fails is its installation's tenant's to see too (a
      // push must never silently do nothing); when even that cannot be read,
      // the next attempt or the binding (adoptDeliveries) attributes it.
      const tenantId = await this.#tenantOf(d).catch(() => null);
      if (last) await this.#finish(d, "failed", outcome, tenantId);
      else await retryLater(this.ctx.db, d.seq, Number(d.attempts), outcome, tenantId);
      return true;
    }
    await this.#finish(d, "done", handled.outcome, handled.tenantId);
    return true;
  }

  /** Records what the delivery did and audits it in its tenant's chain. */
  async #finish(d: DeliveryRow, status: "done" | "failed", outcome: Outcome, tenantId: string | null) {
    await this.ctx.db.transaction(async (trx) => {
      await finishDelivery(trx, d.seq, status, outcome, tenantId);
      if (tenantId) await auditDelivery(trx, tenantId, d, outcome);
    });
  }

  /** The tenant the delivery's installation is bound to, if any. */
  async #tenantOf(d: DeliveryRow): Promise<string | null> {
    if (d.installation_id === null) return null;
    const i = await this.ctx.db("github_installations").where({ id: d.installation_id }).first("tenant_id");
    return (i?.tenant_id as string | null | undefined) ?? null;
  }

  async #handle(d: DeliveryRow): Promise<Handled> {
    const p = JSON.parse(payloadText(d)) as Payload;
    const action = d.action ?? "";
    const db = this.ctx.db;
    const tenantOf = () => this.#tenantOf(d);
    switch (d.event) {
      case "push":
        return pushEvent(this.ctx, d.id, p);
      case "pull_request":
        return pullRequestEvent(this.ctx, d.id, action, p);
      case "installation":
        return { outcome: await installationEvent(db, action, p), tenantId: await tenantOf() };
      case "installation_repositories":
        return { outcome: await installationRepositoriesEvent(db, action, p), tenantId: await tenantOf() };
      case "repository":
        return { outcome: await repositoryEvent(db, action, p), tenantId: await tenantOf() };
      default:
        return {
          outcome: { result: "ignored", detail: `event '${d.event}' is not used by relayctl` },
          tenantId: await tenantOf(),
        };
    }
  }
}

// Works off the stored deliveries in the background (api role): claims the
// oldest one, acts on it by event, records what it did (shown to the tenant and
// audited in its chain), then reports commit statuses that changed. It wakes
// when the webhook route records a delivery and, failing that, every second, so
// deliveries recorded by another instance or before a restart are taken up.
// One delivery at a time per process keeps pushes in the order they arrived,
// which is what lets a newer push supersede a queued older one.
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
import { DeliveryLoop, failedAttempt } from "../webhooks/delivery-loop.js";
import { reportStatuses } from "./statuses.js";

type Handled = { outcome: Outcome; tenantId: string | null };

export class DeliveryProcessor {
  readonly #loop: DeliveryLoop;

  constructor(readonly ctx: GitHubContext) {
    this.#loop = new DeliveryLoop("github", ctx.log, async () => {
      const busy = await this.processOne();
      await reportStatuses(this.ctx);
      return busy;
    });
  }

  start(): void {
    this.#loop.start();
  }

  /** A delivery was recorded: look now rather than at the next tick. */
  nudge(): void {
    this.#loop.nudge();
  }

  async close(): Promise<void> {
    await this.#loop.close();
  }

  /** Processes the next delivery; false when there was none. */
  async processOne(): Promise<boolean> {
    const d = await claimNext(this.ctx.db);
    if (!d) return false;
    let handled: Handled;
    try {
      handled = await this.#handle(d);
    } catch (err) {
      const { last, outcome } = failedAttempt(this.ctx.log, "github", d, err, MAX_ATTEMPTS);
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

// Works off forge_deliveries in the background (api role), as GitHub's
// processor does (github/processor.ts): claims the oldest delivery, acts on it
// by event, records and audits what it did, then reports the commit statuses
// that changed. Woken when a delivery is recorded, else every second; one
// delivery at a time per process keeps pushes in order, which is what lets a
// newer push supersede a queued older one.
import type { ConnectionRow } from "./connections.js";
import type { ForgeContext, Payload } from "./context.js";
import {
  type ForgeDeliveryRow,
  MAX_ATTEMPTS,
  type Outcome,
  claimNextForge,
  finishForgeDelivery,
  payloadText,
  retryForgeLater,
} from "./deliveries.js";
import { forgePushEvent } from "./push.js";
import { reportForgeStatuses } from "./statuses.js";
import { DeliveryLoop, failedAttempt } from "../webhooks/delivery-loop.js";

/** What a merge or pull request event does (previews), when something handles it. */
export type ReviewHandler = (
  ctx: ForgeContext,
  c: ConnectionRow,
  d: ForgeDeliveryRow,
  p: Payload,
) => Promise<Outcome>;

/** The event kinds of each forge's event names. */
function kindOf(c: ConnectionRow, event: string): "push" | "review" | undefined {
  if (c.kind === "gitlab") {
    if (event === "Push Hook" || event === "Tag Push Hook") return "push";
    if (event === "Merge Request Hook") return "review";
    return undefined;
  }
  if (event === "push") return "push";
  if (event === "pull_request" || event === "pull_request_sync") return "review";
  return undefined;
}

export class ForgeProcessor {
  readonly #loop: DeliveryLoop;

  constructor(
    readonly ctx: ForgeContext,
    readonly review?: ReviewHandler,
  ) {
    this.#loop = new DeliveryLoop("forge", ctx.log, async () => {
      const busy = await this.processOne();
      await reportForgeStatuses(this.ctx);
      return busy;
    });
  }

  start(): void {
    this.#loop.start();
  }

  nudge(): void {
    this.#loop.nudge();
  }

  async close(): Promise<void> {
    await this.#loop.close();
  }

  /** Processes the next delivery; false when there was none. */
  async processOne(): Promise<boolean> {
    const d = await claimNextForge(this.ctx.db);
    if (!d) return false;
    let outcome: Outcome;
    try {
      outcome = await this.#handle(d);
    } catch (err) {
      const failed = failedAttempt(this.ctx.log, "forge", d, err, MAX_ATTEMPTS);
      if (failed.last) await finishForgeDelivery(this.ctx.db, d, "failed", failed.outcome);
      else await retryForgeLater(this.ctx.db, d.seq, Number(d.attempts), failed.outcome);
      return true;
    }
    await finishForgeDelivery(this.ctx.db, d, "done", outcome);
    return true;
  }

  async #handle(d: ForgeDeliveryRow): Promise<Outcome> {
    const c = await this.ctx.db("forge_connections").where({ id: d.connection_id }).first<ConnectionRow>();
    if (!c) return { result: "ignored", detail: "the connection was removed" };
    const p = JSON.parse(payloadText(d)) as Payload;
    switch (kindOf(c, d.event)) {
      case "push":
        return forgePushEvent(this.ctx, c, d.id, p);
      case "review":
        if (this.review) return this.review(this.ctx, c, d, p);
        return {
          result: "ignored",
          detail: "previews not available: merge and pull request events are recorded but not acted on",
        };
      default:
        return { result: "ignored", detail: `event '${d.event}' is not used by relayctl` };
    }
  }
}

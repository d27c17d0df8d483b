// Runs an operation through the bus and waits for it within the caller's budget.
// Order matters: subscribe to the completion, then dispatch, so a fast command's
// completion is never missed.
import type { Knex } from "knex";
import type { DoneEvent, JobBus, JobEnvelope } from "../bus/job-bus.js";
import { RcError } from "../errors.js";
import { finishOperation } from "./store.js";

export interface DispatchTarget {
  operationId: string;
  server: { id: string; name: string };
}

export type WaitOutcome = { state: "finished"; event: DoneEvent } | { state: "running" };

/** Dispatches and waits up to `waitMs` for the result. Throws 409 when not connected. */
export async function dispatchAndWait(
  db: Knex,
  bus: JobBus,
  target: DispatchTarget,
  job: JobEnvelope,
  waitMs: number,
): Promise<WaitOutcome> {
  const waiter = await bus.awaitDone(target.operationId).catch(async (err) => {
    await failUndispatched(db, target.operationId, "job bus unavailable");
    throw err;
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const outcome = await bus.dispatch(target.server.id, job).catch(async (err) => {
      await failUndispatched(db, target.operationId, "job bus unavailable");
      throw err;
    });
    if (outcome === "not_connected") {
      const detail = `server '${target.server.name}' is not connected`;
      await failUndispatched(db, target.operationId, detail);
      throw new RcError("RC_ERR_SERVER_NOT_CONNECTED", detail, {
        extra: { operation_id: target.operationId },
      });
    }
    const timeout = new Promise<WaitOutcome>((resolve) => {
      timer = setTimeout(() => resolve({ state: "running" }), waitMs);
    });
    return await Promise.race([
      waiter.done.then((event): WaitOutcome => ({ state: "finished", event })),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
    waiter.cancel();
  }
}

async function failUndispatched(db: Knex, operationId: string, reason: string): Promise<void> {
  await finishOperation(db, operationId, {
    status: "failed",
    exit_code: -1,
    stdout: "",
    stderr: reason,
    duration_ms: 0,
    error: reason,
  }).catch(() => {});
}

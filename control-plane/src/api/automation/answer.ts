// How the Automation API answers an operation's Outcome (operations/outcome.ts):
// finished → 200 with the result, still running → 202, not run → the error of
// the catalogue for its cause (409 not connected, with the operation id so the
// caller can read what was recorded; 503 bus unavailable).
import type { FastifyReply } from "fastify";
import { RcError } from "../../errors.js";
import type { Outcome, StartedOperation } from "../../operations/outcome.js";

export function notRunError(op: StartedOperation, o: Extract<Outcome, { state: "not_run" }>): RcError {
  return o.cause === "not_connected"
    ? new RcError("RC_ERR_SERVER_NOT_CONNECTED", o.reason, { extra: { operation_id: op.id } })
    : new RcError("RC_ERR_BUS_UNAVAILABLE");
}

/**
 * 200 with the result, or 202 running: the status set on `reply` and the body returned, for the
 * async handler to return (Fastify sends it). Returning the reply after send() instead makes it a
 * thenable the handler's promise adopts, and its then() attaches end-of-stream listeners to every
 * response: ~5 % of the api's time under exec-throughput's load. Throws for an operation that did
 * not run.
 */
export function answerOutcome(reply: FastifyReply, op: StartedOperation, outcome: Outcome) {
  if (outcome.state === "not_run") throw notRunError(op, outcome);
  if (outcome.state === "running") {
    reply.status(202);
    return { operation_id: op.id, status: "running" as const };
  }
  reply.status(200);
  return { operation_id: op.id, status: outcome.status, ...outcome.result };
}

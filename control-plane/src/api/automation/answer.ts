// How the Automation API answers an operation's Outcome (operations/service.ts):
// finished → 200 with the result, still running → 202, not run → the error of
// the catalogue for its cause (409 not connected, with the operation id so the
// caller can read what was recorded; 503 bus unavailable).
import type { FastifyReply } from "fastify";
import { RcError } from "../../errors.js";
import type { Outcome, StartedOperation } from "../../operations/service.js";

export function notRunError(op: StartedOperation, o: Extract<Outcome, { state: "not_run" }>): RcError {
  return o.cause === "not_connected"
    ? new RcError("RC_ERR_SERVER_NOT_CONNECTED", o.reason, { extra: { operation_id: op.id } })
    : new RcError("RC_ERR_BUS_UNAVAILABLE");
}

/** 200 with the result, or 202 running; throws for an operation that did not run. */
export function answerOutcome(reply: FastifyReply, op: StartedOperation, outcome: Outcome): FastifyReply {
  if (outcome.state === "not_run") throw notRunError(op, outcome);
  if (outcome.state === "running") return reply.status(202).send({ operation_id: op.id, status: "running" });
  return reply.status(200).send({ operation_id: op.id, status: outcome.status, ...outcome.result });
}

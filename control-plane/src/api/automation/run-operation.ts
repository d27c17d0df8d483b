// The flow shared by the synchronous-style operations (exec, restart): record the
// operation and its audit event, dispatch it, and answer 200 with the result when
// it finishes within the wait, else 202 running (409 when not connected).
import type { FastifyReply, FastifyRequest } from "fastify";
import type { JobEnvelope } from "../../bus/job-bus.js";
import { dispatchAndWait } from "../../operations/dispatch.js";
import { createOperation } from "../../operations/store.js";
import type { ApiContext } from "../context.js";
import type { ServerRef } from "./servers.js";

/** A job as the routes build it; the operation id is added here. */
type JobBody = JobEnvelope extends infer J
  ? J extends JobEnvelope
    ? Omit<J, "operation_id">
    : never
  : never;

export interface OperationSpec {
  operationType: string;
  server: ServerRef;
  runId: string | undefined;
  /** Hard deadline on the agent. */
  deadlineSeconds: number;
  /** How long the HTTP call waits before answering 202. */
  waitSeconds: number;
  /** Operation-specific audit fields (no secrets, no env values). */
  audit: Record<string, unknown>;
  job: JobBody;
}

export async function runOperation(
  ctx: ApiContext,
  req: FastifyRequest,
  reply: FastifyReply,
  spec: OperationSpec,
): Promise<FastifyReply> {
  const { principal } = req;
  const { id } = await createOperation(ctx.db, {
    tenantId: principal.tenantId,
    serverId: spec.server.id,
    operationType: spec.operationType,
    keyId: principal.keyId,
    runId: spec.runId ?? null,
    leaseMs: ctx.config.leaseMs,
    deadlineAt: Date.now() + spec.deadlineSeconds * 1000,
    audit: {
      ...spec.audit,
      server_id: spec.server.id,
      server_name: spec.server.name,
      key_id: principal.keyId,
      key_name: principal.keyName,
      run_id: spec.runId ?? null,
      ip: req.ip,
    },
  });
  const job = { ...spec.job, operation_id: id } as JobEnvelope;
  const outcome = await dispatchAndWait(
    ctx.db,
    ctx.bus,
    { operationId: id, server: spec.server },
    job,
    spec.waitSeconds * 1000,
  );
  if (outcome.state === "running") return reply.status(202).send({ operation_id: id, status: "running" });
  const result = outcome.event.result ?? (await ctx.readResult(id));
  return reply.status(200).send({ operation_id: id, status: outcome.event.status, ...result });
}

// What every Automation API operation records about its caller: the key's
// tenant and identity, the run id and the caller's address, beside the fields
// of its type. The life of the operation itself is the operations service's.
import type { FastifyRequest } from "fastify";
import { userActor } from "../../accounts/users.js";
import { countForStart } from "../../auth/deferred-count.js";
import type { ServerRef, StartSpec, StartedOperation } from "../../operations/outcome.js";
import { viaOf } from "../../mcp/marker.js";
import type { ApiContext } from "../../http/context.js";
import type { OperationType } from "../../operations/types.js";

export interface CallerOperation {
  operationType: OperationType;
  server: ServerRef;
  runId: string | undefined;
  /** Hard deadline of the operation. */
  deadlineSeconds: number;
  /** Type-specific audit fields (no secrets, no env values). */
  audit: Record<string, unknown>;
  leased?: boolean;
  preBootId?: string | null;
}

export function startForCaller(
  ctx: ApiContext,
  req: FastifyRequest,
  spec: CallerOperation,
): Promise<StartedOperation> {
  return ctx.ops.start(callerStart(req, spec));
}

/** What the operation's start records of its caller, beside the fields of its type. */
export function callerStart(req: FastifyRequest, spec: CallerOperation): StartSpec {
  const { principal } = req;
  return {
    tenantId: principal.tenantId,
    server: spec.server,
    operationType: spec.operationType,
    keyId: principal.keyId,
    runId: spec.runId ?? null,
    deadlineSeconds: spec.deadlineSeconds,
    leased: spec.leased,
    preBootId: spec.preBootId,
    // A countWithStart route's deferred count goes with the start (auth/deferred-count.ts).
    count: countForStart(req, spec.server),
    audit: {
      ...spec.audit,
      key_id: principal.keyId,
      key_name: principal.keyName,
      // A person's access token: the person is the actor (oauth/principal.ts).
      ...(principal.user && userActor(principal.user, req.ip)),
      run_id: spec.runId ?? null,
      ip: req.ip,
      ...viaOf(req),
    },
  };
}

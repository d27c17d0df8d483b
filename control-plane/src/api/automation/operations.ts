// GET /api/automation/v1/operations/{operation_id} — the Operation resource, whole output;
// GET /api/automation/v1/operations?run_id=...[&cursor=] — the operations of one run, newest
// first, with output previews, paged by count and size. Both only within the key's scope
// (operations/read.ts): an operation outside it is not found.
import { z } from "zod";
import { RcError } from "../../errors.js";
import {
  RUN_CURSOR_PATTERN,
  type ReadScope,
  getOperation,
  listRunOperations,
} from "../../operations/read.js";
import type { Principal } from "../../auth/principal.js";
import { operation, operationList } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { isUuid, runIdSchema } from "../../http/schemas.js";

const querystring = z.strictObject({
  run_id: runIdSchema,
  cursor: z.string().regex(new RegExp(RUN_CURSOR_PATTERN), "must be a cursor from next_cursor").optional(),
});

const readScope = (p: Principal): ReadScope => ({
  tenantId: p.tenantId,
  servers: p.servers,
  operations: p.operations,
});

const params = z.object({ operation_id: z.string() });

// The dashboard reads operations with its session cookie too (accounts/session-principal.ts).
const access = { credentials: ["automation_key", "access_token", "web_session"] } as const;

export const operationsRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: `${AUTOMATION_API}/operations/:operation_id`,
    access,
    tag: "automation",
    schema: { params },
    responses: { 200: operation },
    handler: async (req) => {
      const id = req.params.operation_id;
      if (!isUuid(id)) throw new RcError("RC_ERR_OPERATION_NOT_FOUND", `operation '${id}' not found`);
      return getOperation(ctx.db, readScope(req.principal), id.toLowerCase());
    },
  }),
  route({
    method: "GET",
    url: `${AUTOMATION_API}/operations`,
    access,
    tag: "automation",
    schema: { querystring },
    responses: { 200: operationList },
    handler: async (req) =>
      listRunOperations(ctx.db, readScope(req.principal), req.query.run_id, req.query.cursor),
  }),
];

// GET /api/automation/v1/operations/{operation_id} — the Operation resource, whole output;
// GET /api/automation/v1/operations?run_id=...[&cursor=] — the operations of one run, newest
// first, with output previews, paged by count and size. Both only within the key's scope
// (operations/read.ts): an operation outside it is not found.
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { RcError } from "../../errors.js";
import {
  RUN_CURSOR_PATTERN,
  type ReadScope,
  getOperation,
  listRunOperations,
} from "../../operations/read.js";
import type { AutomationPrincipal } from "../../auth/automation-key.js";
import type { ApiContext } from "../../http/context.js";
import { isUuid, runIdSchema } from "../../http/schemas.js";

const querystring = z.strictObject({
  run_id: runIdSchema,
  cursor: z.string().regex(new RegExp(RUN_CURSOR_PATTERN), "must be a cursor from next_cursor").optional(),
});

const readScope = (p: AutomationPrincipal): ReadScope => ({
  tenantId: p.tenantId,
  servers: p.servers,
  operations: p.operations,
});

export const operationsRoute =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    // The dashboard reads operations with its session cookie too (accounts/session-principal.ts).
    const config = { acceptsSession: true };
    app.get<{ Params: { operation_id: string } }>("/operations/:operation_id", { config }, async (req) => {
      const id = req.params.operation_id;
      if (!isUuid(id)) throw new RcError("RC_ERR_OPERATION_NOT_FOUND", `operation '${id}' not found`);
      return getOperation(ctx.db, readScope(req.principal), id.toLowerCase());
    });
    app.get("/operations", { schema: { querystring }, config }, async (req) =>
      listRunOperations(ctx.db, readScope(req.principal), req.query.run_id, req.query.cursor),
    );
  };

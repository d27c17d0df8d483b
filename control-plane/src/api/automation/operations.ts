// GET /api/automation/v1/operations/{operation_id} — the Operation resource;
// GET /api/automation/v1/operations?run_id=... — the operations of one run, newest first.
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { RcError } from "../../errors.js";
import { getOperation, presentOperation } from "../../operations/store.js";
import type { ApiContext } from "../context.js";
import { isUuid, runIdSchema } from "./schemas.js";

const querystring = z.strictObject({ run_id: runIdSchema });

export const operationsRoute =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get<{ Params: { operation_id: string } }>("/operations/:operation_id", async (req) => {
      const id = req.params.operation_id;
      if (!isUuid(id)) throw new RcError("RC_ERR_OPERATION_NOT_FOUND", `operation '${id}' not found`);
      return getOperation(ctx.db, req.principal.tenantId, id.toLowerCase());
    });
    app.get("/operations", { schema: { querystring } }, async (req) => {
      const rows = await ctx
        .db("operations as o")
        .join("servers as s", "s.id", "o.server_id")
        .where({ "o.tenant_id": req.principal.tenantId, "o.run_id": req.query.run_id })
        .orderBy([
          { column: "o.started_at", order: "desc" },
          { column: "o.id", order: "desc" },
        ])
        .limit(1000)
        .select("o.*", "s.name as server_name");
      return { run_id: req.query.run_id, operations: rows.map(presentOperation) };
    });
  };

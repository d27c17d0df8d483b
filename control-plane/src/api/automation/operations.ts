// GET /api/automation/v1/operations/{operation_id} — the Operation resource.
import type { FastifyPluginAsync } from "fastify";
import { RcError } from "../../errors.js";
import { getOperation } from "../../operations/store.js";
import type { ApiContext } from "../context.js";
import { UUID_PATTERN } from "./schemas.js";

const uuid = new RegExp(UUID_PATTERN);

export const operationsRoute =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    app.get<{ Params: { operation_id: string } }>("/operations/:operation_id", async (req) => {
      const id = req.params.operation_id;
      if (!uuid.test(id)) throw new RcError("RC_ERR_OPERATION_NOT_FOUND", `operation '${id}' not found`);
      return getOperation(ctx.db, req.principal.tenantId, id.toLowerCase());
    });
  };

// GET /api/audit — the tenant's audit trail, oldest first, filtered by run,
// operation, server and time, paginated by the chain's seq (`cursor` is the seq
// of the last event of the previous page).
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { RcError } from "../../errors.js";
import { iso } from "../../lib/time.js";
import { runIdSchema, uuidSchema } from "../automation/schemas.js";
import { dateTime, queryInt } from "../validation.js";
import type { ApiContext } from "../context.js";

// limit and cursor arrive as digits in the query string and are coerced.
const querystring = z.strictObject({
  run_id: runIdSchema.optional(),
  operation_id: uuidSchema.optional(),
  server_id: uuidSchema.optional(),
  since: z
    .union([z.iso.date(), dateTime], { error: "must be an ISO 8601 date, or date-time with a time zone" })
    .optional(),
  limit: queryInt(1, 1000).optional(),
  cursor: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
});

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

function parseSince(since: string | undefined): number | undefined {
  if (since === undefined) return undefined;
  const ms = Date.parse(since);
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:\d{2}))?$/.test(since) || Number.isNaN(ms))
    throw new RcError("RC_ERR_VALIDATION", `since: '${since}' is not an ISO 8601 date-time`);
  return ms;
}

export const auditRoute =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    app.get("/audit", { schema: { querystring } }, async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit);
      if (limit < 1 || limit > MAX_LIMIT)
        throw new RcError("RC_ERR_VALIDATION", `limit: must be from 1 to ${MAX_LIMIT}`);
      const since = parseSince(q.since);
      const query = ctx.db("audit_events").where({ tenant_id: req.apiPrincipal.tenantId });
      if (q.run_id !== undefined) query.where({ run_id: q.run_id });
      if (q.operation_id !== undefined) query.where({ operation_id: q.operation_id.toLowerCase() });
      if (q.server_id !== undefined) query.where({ server_id: q.server_id.toLowerCase() });
      if (since !== undefined) query.where("created_at", ">=", since);
      if (q.cursor !== undefined) query.where("seq", ">", Number(q.cursor));
      const rows = await query.orderBy("seq", "asc").limit(limit + 1);
      const page = rows.slice(0, limit);
      const outcomes = await operationOutcomes(ctx, req.apiPrincipal.tenantId, page);
      return {
        events: page.map((r) => ({
          seq: Number(r.seq),
          event_type: r.event_type,
          operation_id: r.operation_id,
          key_id: r.key_id,
          server_id: r.server_id,
          run_id: r.run_id,
          created_at: iso(r.created_at),
          payload: JSON.parse(r.payload),
          ...(r.operation_id && outcomes.has(r.operation_id)
            ? { outcome: outcomes.get(r.operation_id) }
            : {}),
          prev_hash: r.prev_hash,
          hash: r.hash,
        })),
        next_cursor: rows.length > limit ? String(page[page.length - 1].seq) : null,
      };
    });
  };

/**
 * The outcome of each operation in the page (status, exit code, stdout, stderr,
 * duration), read from its row. The contract's audit trail carries the result,
 * while the event itself is written, hash-chained, before the operation runs.
 */
async function operationOutcomes(ctx: ApiContext, tenantId: string, rows: { operation_id: string | null }[]) {
  const ids = [...new Set(rows.map((r) => r.operation_id).filter((id): id is string => Boolean(id)))];
  const out = new Map<string, Record<string, unknown>>();
  if (ids.length === 0) return out;
  const ops = await ctx
    .db("operations")
    .where({ tenant_id: tenantId })
    .whereIn("id", ids)
    .select("id", "status", "exit_code", "stdout", "stderr", "duration_ms", "completed_at");
  for (const o of ops) {
    out.set(o.id, {
      status: o.status,
      exit_code: o.exit_code,
      stdout: o.stdout,
      stderr: o.stderr,
      duration_ms: o.duration_ms,
      completed_at: iso(o.completed_at),
    });
  }
  return out;
}

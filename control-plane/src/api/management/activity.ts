// The dashboard's Activity page: GET /api/runs (operations grouped by run_id,
// newest first) and GET /api/operations (filtered, newest first, with output
// previews, each with its CI context and command). Tenant-wide: a person and an
// API key see the organization's operations (an automation key's scoped reads
// stay GET /api/automation/v1/operations). What was asked and by which CI run
// is read from each operation's first audit event, written before it ran.
import type { Knex } from "knex";
import { z } from "zod";
import { RcError } from "../../errors.js";
import { iso } from "../../lib/time.js";
import { RUN_CURSOR_PATTERN, listOperations } from "../../operations/read.js";
import { runIdSchema, uuidSchema } from "../../http/schemas.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";
import { queryInt } from "../../http/validation.js";
import { describeOperation } from "../../operations/types.js";

const STATUSES = ["running", "completed", "failed", "timeout"] as const;
const DEFAULT_LIMIT = 50;
const MAX_LIMIT = 200;

const operationsQuery = z.strictObject({
  run_id: runIdSchema.optional(),
  server_id: uuidSchema.optional(),
  status: z.enum(STATUSES).optional(),
  operation_type: z
    .string()
    .regex(/^[a-z_]{1,32}$/, "must be an operation type such as exec or deploy")
    .optional(),
  limit: queryInt(1, MAX_LIMIT).optional(),
  cursor: z.string().regex(new RegExp(RUN_CURSOR_PATTERN), "must be a cursor from next_cursor").optional(),
});

const runsQuery = z.strictObject({
  limit: queryInt(1, MAX_LIMIT).optional(),
  cursor: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,1400}$/, "must be a cursor from next_cursor")
    .optional(),
});

/** Each operation's first audit event (`operation.<type>`), parsed. */
async function startEvents(db: Knex, tenantId: string, ids: string[]) {
  const out = new Map<string, Record<string, unknown>>();
  if (ids.length === 0) return out;
  const rows: { operation_id: string; payload: string }[] = await db("audit_events")
    .where({ tenant_id: tenantId })
    .whereIn("operation_id", ids)
    .where("event_type", "like", "operation.%")
    .whereNot("event_type", "operation.completed")
    .orderBy("seq", "asc")
    .select("operation_id", "payload");
  for (const r of rows) if (!out.has(r.operation_id)) out.set(r.operation_id, JSON.parse(r.payload));
  return out;
}

/**
 * How each run's completed operations exited: `{"0": 3, "1": 1}`. A command that
 * exits non-zero is still `completed` (the contract), so the status counts alone
 * would call a failing run's commands all done.
 */
async function runExitCodes(db: Knex, tenantId: string, runIds: string[]) {
  const out = new Map<string, Record<string, number>>();
  if (runIds.length === 0) return out;
  const rows: { run_id: string; exit_code: number | null; n: number }[] = await db("operations")
    .where({ tenant_id: tenantId, status: "completed" })
    .whereIn("run_id", runIds)
    .groupBy("run_id", "exit_code")
    .select("run_id", "exit_code", db.raw("COUNT(*) AS n"));
  for (const r of rows) {
    const codes = out.get(r.run_id) ?? {};
    codes[String(r.exit_code ?? "none")] = Number(r.n);
    out.set(r.run_id, codes);
  }
  return out;
}

/** The run_context of each run's latest operation. */
async function runContexts(db: Knex, tenantId: string, runIds: string[]) {
  const out = new Map<string, unknown>();
  if (runIds.length === 0) return out;
  const latest = db("audit_events")
    .where({ tenant_id: tenantId })
    .whereIn("run_id", runIds)
    .where("event_type", "like", "operation.%")
    .whereNot("event_type", "operation.completed")
    .groupBy("run_id")
    .max("seq");
  const rows: { run_id: string; payload: string }[] = await db("audit_events")
    .where({ tenant_id: tenantId })
    .whereIn("seq", latest)
    .select("run_id", "payload");
  for (const r of rows) out.set(r.run_id, JSON.parse(r.payload).run_context ?? null);
  return out;
}

function decodeRunCursor(cursor: string): { lastAt: number; runId: string } {
  try {
    const [lastAt, runId] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Number.isSafeInteger(lastAt) && typeof runId === "string") return { lastAt, runId };
  } catch {
    // falls through to the 422
  }
  throw new RcError("RC_ERR_VALIDATION", "cursor: must be a cursor from next_cursor");
}

const encodeRunCursor = (lastAt: number, runId: string) =>
  Buffer.from(JSON.stringify([lastAt, runId])).toString("base64url");

interface RunRow {
  run_id: string;
  operations: number;
  first_at: number;
  last_at: number;
  [status: string]: unknown;
}

export const activityRoutes = (ctx: ApiContext): RouteSpec[] => {
  const { db } = ctx;
  return [
    route({
      method: "GET",
      url: "/api/operations",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { querystring: operationsQuery },
      handler: async (req) => {
        const q = req.query;
        const tenantId = req.principal.tenantId;
        const page = await listOperations(
          db,
          { tenantId, servers: [], operations: [] },
          { runId: q.run_id, serverId: q.server_id, status: q.status, operationType: q.operation_type },
          { max: q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit), cursor: q.cursor },
        );
        const starts = await startEvents(
          db,
          tenantId,
          page.operations.map((o) => o.operation_id),
        );
        return {
          operations: page.operations.map((o) => {
            const payload = starts.get(o.operation_id) ?? {};
            return {
              ...o,
              run_context: payload.run_context ?? null,
              command: describeOperation(o.operation_type, payload),
              // A deploy operation leads to its deployment's page (steps, log, release).
              deployment:
                typeof payload.deployment_id === "string" && typeof payload.application_id === "string"
                  ? { application_id: payload.application_id, deployment_id: payload.deployment_id }
                  : null,
            };
          }),
          next_cursor: page.next_cursor,
        };
      },
    }),
    route({
      method: "GET",
      url: "/api/runs",
      access: { credentials: MANAGEMENT },
      tag: "management",
      schema: { querystring: runsQuery },
      handler: async (req) => {
        const tenantId = req.principal.tenantId;
        const limit = req.query.limit === undefined ? DEFAULT_LIMIT : Number(req.query.limit);
        const query = db("operations")
          .where({ tenant_id: tenantId })
          .whereNotNull("run_id")
          .groupBy("run_id")
          .select(
            "run_id",
            db.raw("COUNT(*) AS operations"),
            db.raw("MIN(started_at) AS first_at"),
            db.raw("MAX(started_at) AS last_at"),
            ...STATUSES.map((s) => db.raw("SUM(CASE WHEN status = ? THEN 1 ELSE 0 END) AS ??", [s, s])),
          )
          .orderByRaw("MAX(started_at) DESC, run_id DESC")
          .limit(limit + 1);
        if (req.query.cursor !== undefined) {
          const c = decodeRunCursor(req.query.cursor);
          query.havingRaw("MAX(started_at) < ? OR (MAX(started_at) = ? AND run_id < ?)", [
            c.lastAt,
            c.lastAt,
            c.runId,
          ]);
        }
        const rows: RunRow[] = await query;
        const page = rows.slice(0, limit);
        const runIds = page.map((r) => r.run_id);
        const [contexts, exits] = await Promise.all([
          runContexts(db, tenantId, runIds),
          runExitCodes(db, tenantId, runIds),
        ]);
        const last = page.at(-1);
        return {
          runs: page.map((r) => ({
            run_id: r.run_id,
            run_context: contexts.get(r.run_id) ?? null,
            operations: Number(r.operations),
            statuses: Object.fromEntries(STATUSES.map((s) => [s, Number(r[s] ?? 0)])),
            exit_codes: exits.get(r.run_id) ?? {},
            first_at: iso(Number(r.first_at)),
            last_at: iso(Number(r.last_at)),
          })),
          next_cursor:
            rows.length > limit && last ? encodeRunCursor(Number(last.last_at), last.run_id) : null,
        };
      },
    }),
  ];
};

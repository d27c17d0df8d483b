// GET /api/audit — the tenant's audit trail, oldest first (or newest first with
// order=desc: the dashboard's audit log and `relayctl audit`), filtered by run,
// operation, server, application, event type, actor and time, paginated by the
// chain's seq (`cursor` is the seq of the last event of the previous page). A
// page ends at `limit` events or AUDIT_PAGE_BYTES of JSON, whichever comes
// first; an event of an operation carries its outcome with an output preview
// (operations/preview.ts), and every event names its actor (audit/actor.ts).
import type { Knex } from "knex";
import { z } from "zod";
import { RcError } from "../../errors.js";
import { budgetPage } from "../../lib/budget-page.js";
import { iso } from "../../lib/time.js";
import { type PreviewRow, presentPreview, previewColumns } from "../../operations/preview.js";
import { actorMatches, eventActors } from "../../audit/actor.js";
import { runIdSchema, uuidSchema } from "../../http/schemas.js";
import { dateTime, queryInt } from "../../http/validation.js";
import { auditPage } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";

// limit and cursor arrive as digits in the query string and are coerced.
const isoTime = z.union([z.iso.date(), dateTime], {
  error: "must be an ISO 8601 date, or date-time with a time zone",
});

const querystring = z.strictObject({
  run_id: runIdSchema.optional(),
  operation_id: uuidSchema.optional(),
  server_id: uuidSchema.optional(),
  application_id: uuidSchema.optional(),
  // A type (auth.signin) or a family (auth: every auth.* event), several comma-separated.
  event_type: z
    .string()
    .regex(/^[a-z_]{1,40}(\.[a-z_]{1,40})?(,[a-z_]{1,40}(\.[a-z_]{1,40})?){0,19}$/, {
      error: "must be event types or families such as auth.signin or operation, comma-separated",
    })
    .optional(),
  // Who acted: a person's user id or a key's id (audit/actor.ts).
  actor: uuidSchema.optional(),
  since: isoTime.optional(),
  // A date alone means that whole day, up to its end.
  until: isoTime.optional(),
  order: z.enum(["asc", "desc"]).optional(),
  limit: queryInt(1, 1000).optional(),
  cursor: queryInt(0, Number.MAX_SAFE_INTEGER).optional(),
});

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;
export const AUDIT_PAGE_BYTES = 1024 * 1024;

interface EventRow {
  seq: number;
  event_type: string;
  operation_id: string | null;
  key_id: string | null;
  server_id: string | null;
  run_id: string | null;
  created_at: number;
  payload: string;
  prev_hash: string | null;
  hash: string;
}

/** The schema has checked the form (a date, or a date-time with a zone). */
const parseSince = (since: string | undefined) => (since === undefined ? undefined : Date.parse(since));

/** The first instant after `until`: the next day for a date alone, else the next millisecond. */
const parseUntil = (until: string | undefined) =>
  until === undefined ? undefined : Date.parse(until) + (until.length === 10 ? 86_400_000 : 1);

/** `event_type` as SQL: exact types and `family.%` prefixes, any of them. */
function whereTypes(query: Knex.QueryBuilder, list: string) {
  const items = list.split(",");
  query.where((w) => {
    for (const t of items) {
      if (t.includes(".")) w.orWhere("event_type", t);
      // '_' is LIKE's one-character wildcard ("api_key" would match "apiXkey."): escaped, with an
      // escape character both MySQL and SQLite take in an ESCAPE clause.
      else w.orWhereRaw("event_type LIKE ? ESCAPE '!'", [`${t.replace(/[!%_]/g, "!$&")}.%`]);
    }
  });
}

export const auditRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: "/api/audit",
    access: { credentials: MANAGEMENT },
    tag: "management",
    schema: { querystring },
    responses: { 200: auditPage },
    handler: async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? DEFAULT_LIMIT : Number(q.limit);
      if (limit < 1 || limit > MAX_LIMIT)
        throw new RcError("RC_ERR_VALIDATION", `limit: must be from 1 to ${MAX_LIMIT}`);
      const since = parseSince(q.since);
      const until = parseUntil(q.until);
      const desc = q.order === "desc";
      const tenantId = req.principal.tenantId;
      const read = (from: number | undefined, n: number): Promise<EventRow[]> => {
        const query = ctx.db("audit_events").where({ tenant_id: tenantId });
        if (q.run_id !== undefined) query.where({ run_id: q.run_id });
        if (q.operation_id !== undefined) query.where({ operation_id: q.operation_id.toLowerCase() });
        if (q.server_id !== undefined) query.where({ server_id: q.server_id.toLowerCase() });
        // Canonical JSON (no spaces, audit-log.ts) makes the field's text exact; a UUID holds no LIKE wildcard.
        if (q.application_id !== undefined)
          query.where("payload", "like", `%"application_id":"${q.application_id.toLowerCase()}"%`);
        if (q.event_type !== undefined) whereTypes(query, q.event_type);
        // Narrowed in SQL to events naming the id, then to those whose actor it is (actorMatches).
        if (q.actor !== undefined) {
          const id = q.actor.toLowerCase();
          query.where((w) => w.where({ key_id: id }).orWhere("payload", "like", `%${id}%`));
        }
        if (since !== undefined) query.where("created_at", ">=", since);
        if (until !== undefined) query.where("created_at", "<", until);
        if (from !== undefined) query.where("seq", desc ? "<" : ">", from);
        return query
          .orderBy("seq", desc ? "desc" : "asc")
          .limit(n)
          .select(
            "seq",
            "event_type",
            "operation_id",
            "key_id",
            "server_id",
            "run_id",
            "created_at",
            "payload",
            "prev_hash",
            "hash",
          );
      };
      const page = await budgetPage<EventRow, Record<string, unknown>>({
        max: limit,
        budgetBytes: AUDIT_PAGE_BYTES,
        chunk: 100,
        fetch: async (after, n) => {
          let from = after ? Number(after.seq) : q.cursor === undefined ? undefined : Number(q.cursor);
          if (q.actor === undefined) return read(from, n);
          // The SQL narrowing may keep an event that only mentions the id (the key a person
          // created): read on until n events are the actor's own, or the trail ends.
          const out: EventRow[] = [];
          for (;;) {
            const rows = await read(from, n);
            for (const r of rows) if (out.length < n && actorMatches(r, q.actor.toLowerCase())) out.push(r);
            if (out.length >= n || rows.length < n) return out;
            from = Number(rows.at(-1)!.seq);
          }
        },
        present: async (rows) => {
          const outcomes = await operationOutcomes(ctx.db, tenantId, rows);
          const actors = await eventActors(ctx.db, tenantId, rows);
          return rows.map((r, i) => ({
            seq: Number(r.seq),
            event_type: r.event_type,
            operation_id: r.operation_id,
            key_id: r.key_id,
            server_id: r.server_id,
            run_id: r.run_id,
            created_at: iso(r.created_at),
            payload: JSON.parse(r.payload),
            actor: actors[i],
            ...(r.operation_id && outcomes.has(r.operation_id)
              ? { outcome: outcomes.get(r.operation_id) }
              : {}),
            prev_hash: r.prev_hash,
            hash: r.hash,
          }));
        },
      });
      return { events: page.entries, next_cursor: page.next ? String(page.next.seq) : null };
    },
  }),
];

interface OutcomeRow extends PreviewRow {
  id: string;
  status: string;
  exit_code: number | null;
  duration_ms: number | null;
  error: string | null;
  completed_at: number | null;
}

/**
 * The outcome of each operation in the page (status, exit code, output
 * preview, duration), read from its row: the trail carries the result, while
 * the operation's first event is written, hash-chained, before it runs.
 */
async function operationOutcomes(db: Knex, tenantId: string, rows: { operation_id: string | null }[]) {
  const ids = [...new Set(rows.map((r) => r.operation_id).filter((id): id is string => Boolean(id)))];
  const out = new Map<string, Record<string, unknown>>();
  if (ids.length === 0) return out;
  const ops: OutcomeRow[] = await db("operations as o")
    .where({ "o.tenant_id": tenantId })
    .whereIn("o.id", ids)
    .select(
      "o.id",
      "o.status",
      "o.exit_code",
      "o.duration_ms",
      "o.error",
      "o.completed_at",
      ...previewColumns(db, "o"),
    );
  for (const o of ops) {
    out.set(o.id, {
      status: o.status,
      exit_code: o.exit_code,
      ...presentPreview(o, o.status === "running" ? null : o.error),
      duration_ms: o.duration_ms,
      completed_at: iso(o.completed_at),
    });
  }
  return out;
}

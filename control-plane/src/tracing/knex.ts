// Database spans: one CLIENT span per query run inside a traced piece of work
// (an API request, a job on the gateway), from knex's query events. Queries with
// no span around them (heartbeats, the sweeper) make none: they would be noise.
import { type Span, SpanKind, SpanStatusCode, context, trace } from "@opentelemetry/api";
import type { Knex } from "knex";
import { tracer, tracingOn } from "./index.js";

interface QueryEvent {
  __knexQueryUid?: string;
  sql?: string;
  method?: string;
}

const TABLE = /\b(?:from|into|update|table)\s+[`"]?([A-Za-z0-9_]+)/i;

function spanName(q: QueryEvent): string {
  const verb = (q.sql ?? "").trim().split(/\s+/, 1)[0]?.toUpperCase() || "QUERY";
  const table = TABLE.exec(q.sql ?? "")?.[1];
  return table ? `${verb} ${table}` : verb;
}

/** Adds query spans to `db` when tracing is on; the SQL is recorded without its bindings. */
export function traceQueries(db: Knex, system: "mysql" | "sqlite"): void {
  if (!tracingOn()) return;
  const open = new Map<string, Span>();
  const finish = (q: QueryEvent, err?: Error) => {
    const span = q.__knexQueryUid ? open.get(q.__knexQueryUid) : undefined;
    if (!span) return;
    open.delete(q.__knexQueryUid!);
    if (err) span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
    span.end();
  };
  db.on("query", (q: QueryEvent) => {
    if (!q.__knexQueryUid || !trace.getSpan(context.active())) return;
    const span = tracer().startSpan(spanName(q), {
      kind: SpanKind.CLIENT,
      attributes: { "db.system.name": system, "db.query.text": q.sql ?? "", "db.operation.name": q.method },
    });
    // An audited write on MySQL is one round trip of several statements (audit-log.ts):
    // the span is named by the first and counts them all.
    const statements = (q.sql ?? "").split(/;\s*\n/).length;
    if (statements > 1) span.setAttribute("db.operation.batch.size", statements);
    open.set(q.__knexQueryUid, span);
  });
  db.on("query-response", (_res: unknown, q: QueryEvent) => finish(q));
  db.on("query-error", (err: Error, q: QueryEvent) => finish(q, err));
}

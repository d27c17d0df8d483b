// Reads of operations through the Automation API, inside the caller's key
// scope: a key limited to some servers or operations sees only those
// operations. One outside the scope reads as not found (404, the same detail as
// an unknown id), and listings leave it out: a run id is easy to guess, and a
// scoped key must not read another server's output through it.
import type { Knex } from "knex";
import { typesInScope } from "./types.js";
import { RcError } from "../errors.js";
import { budgetPage } from "../lib/budget-page.js";
import { iso } from "../lib/time.js";
import { type PreviewRow, presentPreview, previewColumns } from "./preview.js";
import type { OperationStatus } from "./store.js";

/** The read side of an automation key's scope (empty lists: everything). */
export interface ReadScope {
  tenantId: string;
  servers: string[];
  operations: string[];
}

function inScope(q: Knex.QueryBuilder, scope: ReadScope): Knex.QueryBuilder {
  q.where("o.tenant_id", scope.tenantId);
  if (scope.servers.length > 0)
    q.whereIn(
      "o.server_id",
      scope.servers.map((s) => s.toLowerCase()),
    );
  if (scope.operations.length > 0) {
    q.whereIn("o.operation_type", typesInScope(scope.operations));
  }
  return q;
}

const HEADER = ["o.id", "o.operation_type", "o.server_id", "s.name as server_name", "o.status", "o.run_id"];
const TAIL = ["o.duration_ms", "o.exit_code", "o.error", "o.started_at", "o.completed_at"];

interface HeaderRow {
  id: string;
  operation_type: string;
  server_id: string;
  server_name: string;
  status: OperationStatus;
  run_id: string | null;
  exit_code: number | null;
  duration_ms: number | null;
  error: string | null;
  started_at: number;
  completed_at: number | null;
}

function present(row: HeaderRow, result: Record<string, unknown>) {
  return {
    operation_id: row.id,
    operation_type: row.operation_type,
    server_id: row.server_id,
    server_name: row.server_name,
    status: row.status,
    result:
      row.status === "running"
        ? null
        : { exit_code: row.exit_code ?? -1, ...result, duration_ms: row.duration_ms ?? 0 },
    run_id: row.run_id,
    started_at: iso(row.started_at),
    completed_at: iso(row.completed_at),
    ...(row.error ? { error: row.error } : {}),
  };
}

/** The Operation resource of the contract, whole output included (plus `error` when the service failed it). */
export async function getOperation(db: Knex, scope: ReadScope, id: string) {
  const row = await inScope(db("operations as o").join("servers as s", "s.id", "o.server_id"), scope)
    .where("o.id", id)
    .first<(HeaderRow & { stdout: string | null; stderr: string | null }) | undefined>(
      ...HEADER,
      ...TAIL,
      "o.stdout",
      "o.stderr",
    );
  if (!row) throw new RcError("RC_ERR_OPERATION_NOT_FOUND", `operation '${id}' not found`);
  return present(row, { stdout: row.stdout ?? "", stderr: row.stderr ?? row.error ?? "" });
}

/** Most operations in one page of a run, and most bytes of JSON. */
export const RUN_PAGE_MAX = 1000;
export const RUN_PAGE_BYTES = 1024 * 1024;

type RunRow = HeaderRow & PreviewRow;

/** `<started_at>.<id>` of the last operation of a page; pages run newest first. */
export const RUN_CURSOR_PATTERN = "^\\d{1,18}\\.[0-9a-f-]{36}$";

/** What a listing of operations narrows to, besides the scope. */
export interface OperationFilter {
  runId?: string;
  serverId?: string;
  status?: string;
  operationType?: string;
}

/**
 * One page of operations, newest first, each with an output preview
 * (preview.ts); at most `max` entries and RUN_PAGE_BYTES of JSON. `cursor`
 * (RUN_CURSOR_PATTERN) is a previous page's `next_cursor`.
 */
export async function listOperations(
  db: Knex,
  scope: ReadScope,
  filter: OperationFilter,
  page: { max: number; cursor?: string },
) {
  const { cursor } = page;
  const start = cursor ? { started_at: Number(cursor.split(".")[0]), id: cursor.split(".")[1]! } : undefined;
  const result = await budgetPage<RunRow, ReturnType<typeof present>>({
    max: page.max,
    budgetBytes: RUN_PAGE_BYTES,
    chunk: 100,
    fetch: (after, limit) => {
      const from = after ? { started_at: Number(after.started_at), id: after.id } : start;
      const q = inScope(db("operations as o").join("servers as s", "s.id", "o.server_id"), scope);
      if (filter.runId !== undefined) q.where("o.run_id", filter.runId);
      if (filter.serverId !== undefined) q.where("o.server_id", filter.serverId.toLowerCase());
      if (filter.status !== undefined) q.where("o.status", filter.status);
      if (filter.operationType !== undefined) q.where("o.operation_type", filter.operationType);
      if (from)
        q.where((w) =>
          w
            .where("o.started_at", "<", from.started_at)
            .orWhere((x) => x.where("o.started_at", from.started_at).andWhere("o.id", "<", from.id)),
        );
      return q
        .orderBy([
          { column: "o.started_at", order: "desc" },
          { column: "o.id", order: "desc" },
        ])
        .limit(limit)
        .select(...HEADER, ...TAIL, ...previewColumns(db, "o"));
    },
    present: (rows) => rows.map((r) => present(r, presentPreview(r, r.error))),
  });
  return {
    operations: result.entries,
    next_cursor: result.next ? `${Number(result.next.started_at)}.${result.next.id}` : null,
  };
}

/** One page of a run's operations, newest first, each with an output preview (preview.ts). */
export async function listRunOperations(db: Knex, scope: ReadScope, runId: string, cursor?: string) {
  const page = await listOperations(db, scope, { runId }, { max: RUN_PAGE_MAX, cursor });
  return { run_id: runId, ...page };
}

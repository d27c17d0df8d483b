// Reads of operations through the Automation API, inside the caller's key
// scope: a key limited to some servers or operations sees only those
// operations. One outside the scope reads as not found (404, the same detail as
// an unknown id), and listings leave it out: a run id is easy to guess, and a
// scoped key must not read another server's output through it.
import type { Knex } from "knex";
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
    // Operation types are scope names, except route_sync, which the external_deploy scope runs.
    const types = scope.operations.flatMap((op) => (op === "external_deploy" ? ["route_sync"] : [op]));
    q.whereIn("o.operation_type", types);
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

/** One page of a run's operations, newest first, each with an output preview (preview.ts). */
export async function listRunOperations(db: Knex, scope: ReadScope, runId: string, cursor?: string) {
  const start = cursor ? { started_at: Number(cursor.split(".")[0]), id: cursor.split(".")[1]! } : undefined;
  const page = await budgetPage<RunRow, ReturnType<typeof present>>({
    max: RUN_PAGE_MAX,
    budgetBytes: RUN_PAGE_BYTES,
    chunk: 100,
    fetch: (after, limit) => {
      const from = after ? { started_at: Number(after.started_at), id: after.id } : start;
      const q = inScope(db("operations as o").join("servers as s", "s.id", "o.server_id"), scope).where(
        "o.run_id",
        runId,
      );
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
    run_id: runId,
    operations: page.entries,
    next_cursor: page.next ? `${Number(page.next.started_at)}.${page.next.id}` : null,
  };
}

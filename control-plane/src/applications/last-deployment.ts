// The newest deployment of each application (by seq, whatever its outcome): the
// `last_deployment` of its JSON, so a list can say "failed 3 min ago" beside what
// is live without reading every application's history.
import type { Knex } from "knex";
import { statusOf } from "../deployments/view.js";
import { iso } from "../lib/time.js";

export interface LastDeployment {
  deployment_id: string;
  status: ReturnType<typeof statusOf>;
  commit_ref: string | null;
  commit_sha: string | null;
  created_at: string;
  finished_at: string | null;
}

interface Row {
  id: string;
  application_id: string;
  op_status: string;
  dispatched_at: number | null;
  commit_ref: string | null;
  commit_sha: string | null;
  created_at: number;
  completed_at: number | null;
}

export async function lastDeploymentsOf(
  db: Knex,
  applicationIds: string[],
): Promise<Map<string, LastDeployment>> {
  if (applicationIds.length === 0) return new Map();
  // One row per application: the highest seq (the (application_id, seq) index answers it).
  const newest = db("deployments")
    .whereIn("application_id", applicationIds)
    .groupBy("application_id")
    .max({ seq: "seq" });
  const rows = await db("deployments as d")
    .join("operations as o", "o.id", "d.operation_id")
    .whereIn("d.seq", newest)
    .select<Row[]>(
      "d.id",
      "d.application_id",
      "d.dispatched_at",
      "d.commit_ref",
      "d.commit_sha",
      "d.created_at",
      "o.status as op_status",
      "o.completed_at",
    );
  return new Map(
    rows.map((r) => [
      r.application_id,
      {
        deployment_id: r.id,
        status: statusOf(r),
        commit_ref: r.commit_ref,
        commit_sha: r.commit_sha,
        created_at: new Date(Number(r.created_at)).toISOString(),
        finished_at: iso(r.completed_at),
      },
    ]),
  );
}

// An application's container as its agent last reported it (application_containers,
// written by gateway/container-report.ts): the `container` of its JSON.
import type { Knex } from "knex";
import { iso } from "../lib/time.js";

export type ContainerStateName = "running" | "restarting" | "crashed" | "stopped" | "crash_loop";

export interface ContainerJson {
  name: string;
  state: ContainerStateName;
  exit_code: number | null;
  restart_count: number;
  last_crash_at: string | null;
  since: string | null;
  /** A crash loop the agent holds: started again then (podman); null when not held. */
  held_until: string | null;
  reported_at: string;
}

interface Row {
  application_id: string;
  container_name: string;
  state: ContainerStateName;
  exit_code: number | null;
  restart_count: number;
  last_crash_at: number | string | null;
  since: number | string | null;
  held_until: number | string | null;
  reported_at: number | string;
}

const when = (v: number | string | null) => (v === null ? null : iso(Number(v)));
const at = (v: number | string) => iso(Number(v)) ?? new Date(0).toISOString();

/** The reported container of each application; an application with none is absent. */
export async function containersOf(db: Knex, applicationIds: string[]): Promise<Map<string, ContainerJson>> {
  if (applicationIds.length === 0) return new Map();
  // Only its current server's report: after a move, the old server's row is no longer it.
  const rows = await db("application_containers as c")
    .join("applications as a", function () {
      this.on("a.id", "=", "c.application_id").andOn("a.server_id", "=", "c.server_id");
    })
    .whereIn("c.application_id", applicationIds)
    .select<Row[]>("c.*");
  return new Map(
    rows.map((r) => [
      r.application_id,
      {
        name: r.container_name,
        state: r.state,
        exit_code: r.exit_code === null ? null : Number(r.exit_code),
        restart_count: Number(r.restart_count),
        last_crash_at: when(r.last_crash_at),
        since: when(r.since),
        held_until: when(r.held_until),
        reported_at: at(r.reported_at),
      },
    ]),
  );
}

/** `{ container }` of one application's JSON (null: nothing reported). */
export async function containerOf(
  db: Knex,
  applicationId: string,
): Promise<{ container: ContainerJson | null }> {
  return { container: (await containersOf(db, [applicationId])).get(applicationId) ?? null };
}

// The agent's report of its deployed containers (agent.proto ContainerReport)
// as rows of application_containers (migration 016), one per application of
// this server. The report is the whole picture: this server's applications it
// leaves out have no container (their rows go). Entries for applications that
// are not this server's are ignored: an agent cannot write another's state
// (and a machine's engine may hold containers of applications moved away).
import { ContainerState, type ContainerReport } from "@relayctl/proto";
import type { Knex } from "knex";

const STATE: Partial<Record<ContainerState, string>> = {
  [ContainerState.CONTAINER_STATE_RUNNING]: "running",
  [ContainerState.CONTAINER_STATE_RESTARTING]: "restarting",
  [ContainerState.CONTAINER_STATE_CRASHED]: "crashed",
  [ContainerState.CONTAINER_STATE_STOPPED]: "stopped",
  [ContainerState.CONTAINER_STATE_CRASH_LOOP]: "crash_loop",
};

const ms = (v: number) => (v > 0 ? v : null);

export async function storeContainerReport(db: Knex, serverId: string, r: ContainerReport): Promise<void> {
  const now = Date.now();
  await db.transaction(async (trx) => {
    const own = await trx("applications").where({ server_id: serverId }).select<{ id: string }[]>("id");
    const mine = new Set(own.map((a) => a.id));
    const rows = r.applications.flatMap((a) => {
      const state = STATE[a.state];
      if (!mine.has(a.applicationId) || state === undefined) return [];
      return [
        {
          application_id: a.applicationId,
          server_id: serverId,
          container_name: a.containerName.slice(0, 255),
          state,
          exit_code: a.exitCode ?? null,
          restart_count: a.restartCount,
          last_crash_at: ms(a.lastCrashUnixMs),
          since: ms(a.sinceUnixMs),
          held_until: ms(a.heldUntilUnixMs),
          reported_at: now,
        },
      ];
    });
    const reported = rows.map((row) => row.application_id);
    await trx("application_containers")
      .where({ server_id: serverId })
      .whereNotIn("application_id", reported)
      .delete();
    // A moved application's row names its old server: the new one's report takes it over.
    if (rows.length > 0)
      await trx("application_containers").insert(rows).onConflict("application_id").merge();
  });
}

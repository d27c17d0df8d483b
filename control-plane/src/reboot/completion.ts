// A reboot is done when its server's agent says Hello with another boot id than
// the one recorded when the reboot was asked for (DESIGN.md "Operations"). Run by
// the gateway before it welcomes the agent, so a stale "outcome unknown" report
// the agent may re-send after Welcome finds the operation already finished.
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { OperationService } from "../operations/service.js";

interface RunningReboot {
  id: string;
  pre_boot_id: string | null;
  started_at: number;
}

/** The boot id the server's agent last said Hello with (null: it never did). */
export async function currentBootId(db: Knex, serverId: string): Promise<string | null> {
  const row = await db("servers").where({ id: serverId }).first<{ boot_id: string | null }>("boot_id");
  return row?.boot_id ?? null;
}

export async function completeReboots(
  ops: OperationService,
  log: Logger,
  serverId: string,
  bootId: string,
): Promise<void> {
  if (!bootId) return; // an agent that cannot read its boot id cannot prove a reboot
  const rows = await ops
    .db("operations")
    .where({ server_id: serverId, status: "running", operation_type: "reboot" })
    .select<RunningReboot[]>("id", "pre_boot_id", "started_at");
  for (const row of rows) {
    // Same boot: a reconnect, not a reboot. No recorded boot id (the agent had never
    // said Hello): any Hello is the server coming back.
    if (row.pre_boot_id === bootId) continue;
    const result = {
      status: "completed" as const,
      exit_code: 0,
      stdout: `rebooted: boot id ${row.pre_boot_id || "(unknown)"} -> ${bootId}\n`,
      stderr: "",
      duration_ms: Date.now() - Number(row.started_at),
    };
    if (await ops.complete(row.id, result, serverId))
      log.info({ operation_id: row.id, boot_id: bootId }, "reboot completed");
  }
}

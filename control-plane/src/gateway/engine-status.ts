// The agent's container-engine report (agent.proto EngineStatus) as columns of
// its server row (migration 014), written with Hello and on every change the
// agent sends; read back by GET /api/servers (servers/servers.ts).
import type { EngineStatus } from "@relayctl/proto";
import type { Knex } from "knex";

/** Longer details are cut: they are one line of reasons, never a log. */
const DETAIL_MAX = 2000;

export function engineColumns(e: EngineStatus): Record<string, string | number> {
  return {
    engine_name: e.name.slice(0, 16),
    engine_version: e.version.slice(0, 64),
    // A number, not a boolean: Hello's batched write carries plain values (MySQL tinyint, SQLite integer).
    engine_ok: e.ok ? 1 : 0,
    engine_detail: e.detail.slice(0, DETAIL_MAX),
  };
}

export async function storeEngineStatus(db: Knex, serverId: string, e: EngineStatus): Promise<void> {
  await db("servers").where({ id: serverId }).update(engineColumns(e));
}

// The agent's reverse-proxy report (agent.proto ProxyStatus) as columns of its
// server row (migration 015), written with Hello and on every change the agent
// sends; read back by GET /api/servers (servers/servers.ts).
import type { ProxyStatus } from "@relayctl/proto";
import type { Knex } from "knex";

/** Longer details are cut: they are one line, never a log. */
const DETAIL_MAX = 2000;

export function proxyColumns(p: ProxyStatus): Record<string, string | number> {
  return {
    proxy_kind: p.kind.slice(0, 16),
    // A number, not a boolean: Hello's batched write carries plain values (MySQL tinyint, SQLite integer).
    proxy_ok: p.ok ? 1 : 0,
    proxy_detail: p.detail.slice(0, DETAIL_MAX),
  };
}

export async function storeProxyStatus(db: Knex, serverId: string, p: ProxyStatus): Promise<void> {
  await db("servers").where({ id: serverId }).update(proxyColumns(p));
}

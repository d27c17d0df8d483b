// A revoked (or re-enrolled) agent credential ends the streams it opened, not
// only the next connect: every interval the gateway compares the credentials of
// the streams it holds with the servers' current ones, in batches, and closes
// those that no longer match. One query per batch keeps it cheap with many agents.
import type { Knex } from "knex";
import type { Logger } from "pino";
import type { StreamRegistry } from "./registry.js";

const BATCH = 500;

export async function closeRevokedStreams(db: Knex, registry: StreamRegistry, log: Logger): Promise<number> {
  const streams = registry.streams();
  let closed = 0;
  for (let i = 0; i < streams.length; i += BATCH) {
    const batch = streams.slice(i, i + BATCH);
    const rows = await db("servers")
      .whereIn(
        "id",
        batch.map((s) => s.serverId),
      )
      .select<{ id: string; agent_credential_hash: string | null }[]>("id", "agent_credential_hash");
    const current = new Map(rows.map((r) => [r.id, r.agent_credential_hash]));
    for (const stream of batch) {
      if (current.get(stream.serverId) === stream.credentialHash) continue;
      log.warn({ server_id: stream.serverId }, "agent credential revoked: closing its stream");
      registry.detach(stream, "agent credential revoked");
      closed++;
    }
  }
  return closed;
}

export function startCredentialWatch(db: Knex, registry: StreamRegistry, log: Logger, intervalMs: number) {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    closeRevokedStreams(db, registry, log)
      .catch((err) => log.warn({ err }, "credential watch failed; will retry"))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

// A server's presence as its page shows it (issue 31, defect 7): last_seen_at
// becomes the agent's last heartbeat (throttled, gateway/presence.ts) instead of
// its connect time, which moves to connected_at; booted_at is the machine's boot
// (Hello, for its uptime); removed_at marks a server removed from the dashboard:
// its agent credential is revoked and it leaves the lists, while its row stays
// for the history (operations and audit events name it).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    t.bigInteger("connected_at").nullable();
    t.bigInteger("booted_at").nullable();
    t.bigInteger("removed_at").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    t.dropColumn("removed_at");
    t.dropColumn("booted_at");
    t.dropColumn("connected_at");
  });
}

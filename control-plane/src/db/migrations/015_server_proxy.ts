// The reverse proxy each server's agent reports (agent.proto ProxyStatus, in
// Hello and on every change): GET /api/servers shows it as `proxy`, so a person
// sees that deployments will fail at switch (a crashed Caddy) before trying one.
// All null until the agent first reports (an agent older than this never does).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    // caddy, nginx, traefik or none.
    t.string("proxy_kind", 16).nullable();
    t.boolean("proxy_ok").nullable();
    // Where it was checked, or why it does not answer (capped by the gateway).
    t.text("proxy_detail").nullable();
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("servers", (t) => {
    t.dropColumn("proxy_detail");
    t.dropColumn("proxy_ok");
    t.dropColumn("proxy_kind");
  });
}

// application_route_state keeps only the conflict guard's columns (last_session_id,
// last_synced_at). What each sync applied (signature, port, image tag, hostnames)
// was also written here, read by nothing, on every sync's answer path: it is in the
// sync's audit event (`external_deploy.sync`, one per server, every entry with its
// outcome) and in the agent's route ledger, which decides noop and drift. The
// columns are emptied, not dropped: a control plane of the version before, still
// running during a rolling upgrade, writes them and must not fail.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex("application_route_state").update({
    signature_hash: null,
    container_port: null,
    image_tag: null,
    synced_fqdns: null,
  });
}

export async function down(): Promise<void> {
  // Nothing to give back: the audit trail holds what the columns held.
}

// Releases (issue 29): every deployment that switched traffic is a release,
// recorded on its deployments row:
// - image_id: the image by the engine's id (`sha256:...`), since a tag moves;
// - config: what it ran with, for a rollback: port, health check, the names of
//   the request's env overrides (their values are never stored), the route's
//   hostnames; env_sealed: the stored env it ran with, sealed with
//   RELAYCTL_MASTER_KEY (rotated with the other sealed columns);
// - config_hash: a keyed hash of the whole configuration, overrides included
//   (releases.ts says how), to tell two releases' configurations apart;
// - rollback_of: the release a rollback started again.
// applications.keep_releases: retention, how many releases' images stay on the
// server for a rollback.
// application_cleanups is keyed by application and server: an application moved
// to another server leaves a cleanup of the old one (its containers and images)
// while it lives on, and one moved twice leaves one per server it left.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("deployments", (t) => {
    t.string("image_id", 80).nullable();
    t.text("config").nullable();
    t.text("env_sealed").nullable();
    t.string("config_hash", 64).nullable();
    t.string("rollback_of", 36).nullable();
  });
  await knex.schema.alterTable("applications", (t) => {
    t.integer("keep_releases").notNullable().defaultTo(5);
  });
  await knex.schema.alterTable("application_cleanups", (t) => {
    t.dropPrimary();
    t.primary(["application_id", "server_id"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("application_cleanups", (t) => {
    t.dropPrimary();
    t.primary(["application_id"]);
  });
  await knex.schema.alterTable("applications", (t) => t.dropColumn("keep_releases"));
  await knex.schema.alterTable("deployments", (t) => {
    t.dropColumn("rollback_of");
    t.dropColumn("config_hash");
    t.dropColumn("env_sealed");
    t.dropColumn("config");
    t.dropColumn("image_id");
  });
}

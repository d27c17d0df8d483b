// Migrations are listed here explicitly (not read from a folder) so they work the
// same from src/ under tsx and from dist/ after the build.
import type { Knex } from "knex";
import * as m001 from "./001_init.js";
import * as m002 from "./002_keys.js";
import * as m003 from "./003_registry.js";
import * as m004 from "./004_reboot.js";
import * as m005 from "./005_external_deploy.js";
import * as m006 from "./006_application_pin_port.js";
import * as m007 from "./007_audit_keyed.js";
import * as m008 from "./008_result_detail.js";
import * as m009 from "./009_refusal_counts.js";
import * as m010 from "./010_deployments.js";
import * as m011 from "./011_accounts.js";
import * as m012 from "./012_github.js";
import * as m013 from "./013_oauth_authorization_code.js";
import * as m014 from "./014_server_engine.js";
import * as m015 from "./015_server_proxy.js";
import * as m016 from "./016_application_runtime.js";
import * as m017 from "./017_releases.js";
import * as m018 from "./018_roles.js";
import * as m019 from "./019_accounts_per_tenant.js";
import * as m020gh from "./020_github_install_person.js";
import * as m021gh from "./021_github_delivery_digest.js";
import * as m022people from "./022_people_last_use.js";
import * as m023servers from "./023_server_presence.js";
import * as m024push from "./024_application_push_filters.js";
import * as m025previews from "./025_previews.js";
import * as m026forges from "./026_forges.js";
import * as m027fleets from "./027_fleets.js";
import * as m028routeState from "./028_route_state_guard_only.js";
import * as m029heldUntil from "./029_container_held_until.js";
import * as m030pushRollouts from "./030_push_rollouts.js";
import * as m031fleetPushQueue from "./031_fleet_push_queue.js";
import * as m032queuedCommitStatuses from "./032_queued_commit_statuses.js";

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const MIGRATIONS: Record<string, Migration> = {
  "001_init": m001,
  "002_keys": m002,
  "003_registry": m003,
  "004_reboot": m004,
  "005_external_deploy": m005,
  "006_application_pin_port": m006,
  "007_audit_keyed": m007,
  "008_result_detail": m008,
  "009_refusal_counts": m009,
  "010_deployments": m010,
  "011_accounts": m011,
  "012_github": m012,
  "013_oauth_authorization_code": m013,
  "014_server_engine": m014,
  "015_server_proxy": m015,
  "016_application_runtime": m016,
  "017_releases": m017,
  "018_roles": m018,
  "019_accounts_per_tenant": m019,
  "020_github_install_person": m020gh,
  "021_github_delivery_digest": m021gh,
  "022_people_last_use": m022people,
  "023_server_presence": m023servers,
  "024_application_push_filters": m024push,
  "025_previews": m025previews,
  "026_forges": m026forges,
  "027_fleets": m027fleets,
  "028_route_state_guard_only": m028routeState,
  "029_container_held_until": m029heldUntil,
  "030_push_rollouts": m030pushRollouts,
  "031_fleet_push_queue": m031fleetPushQueue,
  "032_queued_commit_statuses": m032queuedCommitStatuses,
};

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => Object.keys(MIGRATIONS).sort(),
  getMigrationName: (name) => name,
  getMigration: async (name) => MIGRATIONS[name],
};

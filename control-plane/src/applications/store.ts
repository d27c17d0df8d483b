// The applications table: a container on one server, reached through that
// server's reverse proxy at its bound domain names. A domain is bound to at most
// one application per server (application_fqdns' primary key), so a proxy never
// gets two competing routes for it. Every change is audited with its actor.
import { KEEP_RELEASES } from "../deployments/releases.js";
import { pendingCleanupRow } from "./cleanup.js";
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { iso } from "../lib/time.js";
import type { AppsUrl } from "./app-url.js";
import { checkDefaultHost } from "./hosts.js";
import { compileFqdns } from "./validate.js";
import { type FleetColumns, type FleetInput, fleetColumns, presentFleet } from "../fleets/app-fields.js";
import { fleetApplicationIdsOn, fleetMembersOf } from "../fleets/placement.js";
import { type PreviewSettingsInput, mergePreviewSettings, previewSettings } from "../previews/settings.js";
import { isUuid } from "../http/validation.js";
import { seal } from "../registry/crypto.js";
import { requireMasterKey } from "../registry/credentials.js";
import {
  type BuildInput,
  DEFAULT_BRANCH,
  DEFAULT_HEALTH_PATH,
  DEFAULT_HEALTH_TIMEOUT_SECONDS,
  checkRepository,
  compileBuild,
  parseBuild,
} from "./source.js";

export interface ApplicationRow extends FleetColumns {
  id: string;
  tenant_id: string;
  server_id: string;
  name: string;
  linked_container_name: string;
  container_port: number;
  /** 0/1 (MariaDB, SQLite) or boolean: sync entries must name container_port. */
  pin_port: number | boolean;
  fqdns: string;
  git_repository: string | null;
  deploy_branch: string;
  git_username: string | null;
  git_password_sealed: string | null;
  git_credential_updated_at: number | null;
  /** JSON of a Build (source.ts), or null: nothing to deploy from (external deploy only). */
  build: string | null;
  health_check_path: string;
  health_check_timeout_seconds: number;
  auto_deploy: number | boolean;
  /** Retention: the images of this many newest releases stay on the server (deployments/releases.ts). */
  keep_releases: number;
  /** GitHub's repository id when linked through the GitHub App (migration 012). */
  github_repository_id?: number | null;
  /** GitHub tag pushes matching this glob deploy too (migration 024); null: none. */
  deploy_tags?: string | null;
  /** JSON array of globs: a GitHub branch push deploys only when a changed file matches (migration 024). */
  watch_paths?: string | null;
  /** JSON of the preview settings (previews/settings.ts, migration 025); null: the defaults. */
  previews?: string | null;
  /** The production application of a preview (previews/store.ts); null for every other. */
  preview_of?: string | null;
  created_at: number;
  updated_at: number;
}

export interface ApplicationInput extends FleetInput {
  name?: string;
  server_id?: string;
  linked_container_name?: string;
  container_port?: number;
  pin_port?: boolean;
  fqdns?: string[];
  git_repository?: string | null;
  deploy_branch?: string;
  /** Write-only; null removes it. */
  git_credential?: { username: string; password: string } | null;
  build?: BuildInput | null;
  health_check_path?: string;
  health_check_timeout_seconds?: number;
  auto_deploy?: boolean;
  deploy_tags?: string | null;
  watch_paths?: string[] | null;
  keep_releases?: number;
  previews?: PreviewSettingsInput;
}

/** Who made a change, for the audit event (key ids and names, the caller's IP). */
export type Actor = Record<string, unknown>;

export function presentApplication(row: ApplicationRow, serverName?: string) {
  return {
    id: row.id,
    name: row.name,
    server_id: row.server_id,
    ...(serverName !== undefined ? { server_name: serverName } : {}),
    linked_container_name: row.linked_container_name,
    container_port: Number(row.container_port),
    pin_port: Boolean(Number(row.pin_port)),
    fqdns: JSON.parse(row.fqdns) as string[],
    git_repository: row.git_repository ?? null,
    deploy_branch: row.deploy_branch ?? DEFAULT_BRANCH,
    git_credential:
      row.git_username && row.git_password_sealed
        ? { username: row.git_username, updated_at: iso(Number(row.git_credential_updated_at)) }
        : null,
    build: parseBuild(row.build ?? null),
    health_check_path: row.health_check_path ?? DEFAULT_HEALTH_PATH,
    health_check_timeout_seconds: Number(row.health_check_timeout_seconds ?? DEFAULT_HEALTH_TIMEOUT_SECONDS),
    auto_deploy: Boolean(Number(row.auto_deploy ?? 0)),
    deploy_tags: row.deploy_tags ?? null,
    watch_paths: row.watch_paths ? (JSON.parse(row.watch_paths) as string[]) : null,
    keep_releases: Number(row.keep_releases ?? KEEP_RELEASES.default),
    ...presentFleet(row),
    previews: previewSettings(row.previews),
    preview_of: row.preview_of ?? null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

export async function getApplication(db: Knex, tenantId: string, id: string): Promise<ApplicationRow> {
  const row = isUuid(id)
    ? await db("applications").where({ id: id.toLowerCase(), tenant_id: tenantId }).first<ApplicationRow>()
    : undefined;
  if (!row) throw new RcError("RC_ERR_APPLICATION_NOT_FOUND", `application '${id}' not found`);
  return row;
}

export async function listApplications(db: Knex, tenantId: string) {
  const rows = await db("applications as a")
    .join("servers as s", "s.id", "a.server_id")
    // Previews are listed under their application (previews/routes.ts), not here.
    .where({ "a.tenant_id": tenantId, "a.preview_of": null })
    .orderBy("a.created_at", "asc")
    .select<(ApplicationRow & { server_name: string })[]>("a.*", "s.name as server_name");
  return rows.map((r) => presentApplication(r, r.server_name));
}

/** A body reference to a server: another tenant's or an unknown id is a 422 (like key scopes). */
async function checkServer(db: Knex, tenantId: string, serverId: string): Promise<string> {
  const server = await db("servers")
    // A removed server (servers/removal.ts) keeps its row for the history but takes no application.
    .where({ id: serverId.toLowerCase(), tenant_id: tenantId, removed_at: null })
    .first<{ id: string } | undefined>("id");
  if (!server) throw new RcError("RC_ERR_VALIDATION", `server_id: unknown server '${serverId}'`);
  return server.id;
}

async function checkName(db: Knex, tenantId: string, name: string, exceptId?: string) {
  const q = db("applications").where({ tenant_id: tenantId, name });
  if (exceptId) q.whereNot({ id: exceptId });
  if (await q.first("id")) {
    // The field first, like a 422's detail: the dashboard shows it beside that field.
    throw new RcError("RC_ERR_APPLICATION_NAME_TAKEN", `name: an application named '${name}' already exists`);
  }
}

/** Binds `fqdns` to the application on its server; 409 naming the holder of a taken one. */
async function bindFqdns(trx: Knex.Transaction, app: ApplicationRow, fqdns: string[]): Promise<void> {
  await trx("application_fqdns").where({ application_id: app.id }).delete();
  if (fqdns.length === 0) return;
  const holders = await trx("application_fqdns as f")
    .join("applications as a", "a.id", "f.application_id")
    .where({ "f.server_id": app.server_id })
    .whereIn("f.fqdn", fqdns)
    .forUpdate()
    .select<{ fqdn: string; name: string }[]>("f.fqdn", "a.name");
  if (holders.length > 0) {
    const h = holders[0]!;
    throw new RcError(
      "RC_ERR_FQDN_TAKEN",
      `fqdns: domain '${h.fqdn}' is already bound to application '${h.name}' on this server`,
    );
  }
  await trx("application_fqdns").insert(
    fqdns.map((fqdn) => ({ server_id: app.server_id, fqdn, application_id: app.id })),
  );
}

function isDuplicate(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? "";
  return code === "ER_DUP_ENTRY" || code.startsWith("SQLITE_CONSTRAINT");
}

async function audited<T>(
  db: Knex,
  app: ApplicationRow,
  eventType: string,
  payload: Record<string, unknown>,
  work: (trx: Knex.Transaction) => Promise<T>,
): Promise<T> {
  try {
    return await db.transaction(async (trx) => {
      const out = await work(trx);
      await appendAuditEvent(trx, {
        tenantId: app.tenant_id,
        eventType,
        serverId: app.server_id,
        payload: { application_id: app.id, application_name: app.name, ...payload },
      });
      return out;
    });
  } catch (err) {
    // Two requests racing for one name or domain: the loser gets a 409 too.
    if (isDuplicate(err)) {
      throw new RcError(
        "RC_ERR_FQDN_TAKEN",
        "the name or a domain name was taken by a concurrent change: read the applications and retry",
        { cause: err },
      );
    }
    throw err;
  }
}

/** A registry credential named by a build must be the tenant's own (422 otherwise, like key scopes). */
async function checkCredential(db: Knex, tenantId: string, build: ReturnType<typeof compileBuild>) {
  if (build?.type !== "image" || !build.registry_credential_id) return;
  await checkRegistryCredential(db, tenantId, build.registry_credential_id, "build.registry_credential_id");
}

/** 422 unless `id` is one of the tenant's registry credentials; `field` names it in the detail. */
export async function checkRegistryCredential(db: Knex, tenantId: string, id: string, field: string) {
  const found = await db("registry_credentials")
    .where({ id: id.toLowerCase(), tenant_id: tenantId })
    .first("id");
  if (!found) throw new RcError("RC_ERR_VALIDATION", `${field}: unknown registry credential '${id}'`);
}

/** The columns a deploy source sets, checked; secrets sealed (never stored in the clear). */
async function sourceColumns(
  db: Knex,
  tenantId: string,
  input: ApplicationInput,
  before: ApplicationRow | undefined,
  masterKey: Buffer | undefined,
  now: number,
): Promise<Partial<ApplicationRow>> {
  const out: Partial<ApplicationRow> = {};
  if (input.git_repository !== undefined)
    out.git_repository = input.git_repository === null ? null : checkRepository(input.git_repository);
  if (input.deploy_branch !== undefined) out.deploy_branch = input.deploy_branch;
  if (input.git_credential !== undefined) {
    out.git_username = input.git_credential?.username ?? null;
    out.git_password_sealed = input.git_credential
      ? seal(requireMasterKey(masterKey), input.git_credential.password)
      : null;
    out.git_credential_updated_at = input.git_credential ? now : null;
  }
  const repository = out.git_repository !== undefined ? out.git_repository : (before?.git_repository ?? null);
  if (input.build !== undefined || input.git_repository !== undefined) {
    const current =
      input.build !== undefined ? input.build : (parseBuild(before?.build ?? null) ?? undefined);
    const build = compileBuild(current, repository !== null);
    await checkCredential(db, tenantId, build);
    out.build = build ? JSON.stringify(build) : null;
  }
  if (input.health_check_path !== undefined) out.health_check_path = input.health_check_path;
  if (input.health_check_timeout_seconds !== undefined)
    out.health_check_timeout_seconds = input.health_check_timeout_seconds;
  if (input.auto_deploy !== undefined) out.auto_deploy = input.auto_deploy;
  if (input.deploy_tags !== undefined) out.deploy_tags = input.deploy_tags;
  if (input.watch_paths !== undefined)
    out.watch_paths = input.watch_paths === null ? null : JSON.stringify(input.watch_paths);
  if (input.keep_releases !== undefined) out.keep_releases = input.keep_releases;
  Object.assign(out, await fleetColumns(db, tenantId, input));
  if (input.previews !== undefined) {
    if (before?.preview_of)
      throw new RcError("RC_ERR_VALIDATION", "previews: a preview has no previews of its own");
    out.previews = mergePreviewSettings(before?.previews, input.previews);
  }
  return out;
}

export async function createApplication(
  db: Knex,
  tenantId: string,
  input: ApplicationInput,
  actor: Actor,
  masterKey?: Buffer,
  /** RELAYCTL_APPS_URL: the default hostname must not clash (hosts.ts). */
  appsUrl?: AppsUrl,
) {
  const fqdns = compileFqdns(input.fqdns ?? []);
  const serverId = await checkServer(db, tenantId, input.server_id!);
  await checkName(db, tenantId, input.name!);
  const now = Date.now();
  const source = await sourceColumns(db, tenantId, input, undefined, masterKey, now);
  const row: ApplicationRow = {
    id: randomUUID(),
    tenant_id: tenantId,
    server_id: serverId,
    name: input.name!,
    linked_container_name: input.linked_container_name!,
    container_port: input.container_port!,
    pin_port: input.pin_port === true,
    fqdns: JSON.stringify(fqdns),
    git_repository: null,
    deploy_branch: DEFAULT_BRANCH,
    git_username: null,
    git_password_sealed: null,
    git_credential_updated_at: null,
    build: null,
    health_check_path: DEFAULT_HEALTH_PATH,
    health_check_timeout_seconds: DEFAULT_HEALTH_TIMEOUT_SECONDS,
    auto_deploy: false,
    keep_releases: KEEP_RELEASES.default,
    ...source,
    created_at: now,
    updated_at: now,
  };
  const resource = presentApplication(row);
  await audited(db, row, "application.created", { application: resource, ...actor }, async (trx) => {
    await checkDefaultHost(trx, appsUrl, row, { name: true, fqdns: true });
    await trx("applications").insert(row);
    await bindFqdns(trx, row, fqdns);
  });
  return resource;
}

/** Returns the new resource and the row as it was (its server may have changed). */
export async function updateApplication(
  db: Knex,
  tenantId: string,
  id: string,
  input: ApplicationInput,
  actor: Actor,
  masterKey?: Buffer,
  appsUrl?: AppsUrl,
) {
  const before = await getApplication(db, tenantId, id);
  const changes: Partial<ApplicationRow> = {};
  if (input.name !== undefined && input.name !== before.name) {
    await checkName(db, tenantId, input.name, before.id);
    changes.name = input.name;
  }
  if (input.server_id !== undefined) changes.server_id = await checkServer(db, tenantId, input.server_id);
  if (input.linked_container_name !== undefined) changes.linked_container_name = input.linked_container_name;
  if (input.container_port !== undefined) changes.container_port = input.container_port;
  if (input.pin_port !== undefined) changes.pin_port = input.pin_port;
  const fqdns = input.fqdns !== undefined ? compileFqdns(input.fqdns) : JSON.parse(before.fqdns);
  changes.fqdns = JSON.stringify(fqdns);
  changes.updated_at = Date.now();
  Object.assign(changes, await sourceColumns(db, tenantId, input, before, masterKey, changes.updated_at));
  const after: ApplicationRow = { ...before, ...changes };
  const resource = presentApplication(after);
  const changed = Object.keys(input).sort();
  await audited(
    db,
    after,
    "application.updated",
    { changed, application: resource, ...actor },
    async (trx) => {
      const moved = after.server_id !== before.server_id;
      await checkDefaultHost(trx, appsUrl, after, {
        name: moved || after.name !== before.name,
        fqdns: moved || input.fqdns !== undefined,
      });
      await trx("applications").where({ id: before.id }).update(changes);
      await bindFqdns(trx, after, fqdns);
      if (moved) {
        // What ran on the old server goes (cleanup.ts), even while its agent is away; a
        // cleanup still pending on the new one would remove what deploys there next.
        const server = await trx("servers").where({ id: before.server_id }).first<{ name: string }>("name");
        const cleanup = pendingCleanupRow({
          tenantId,
          server: { id: before.server_id, name: server?.name ?? "" },
          applicationId: before.id,
          applicationName: after.name,
        });
        await trx("application_cleanups").insert(cleanup).onConflict(["application_id", "server_id"]).merge();
        await trx("application_cleanups")
          .where({ application_id: before.id, server_id: after.server_id })
          .delete();
      }
    },
  );
  return { resource, before };
}

export async function deleteApplication(
  db: Knex,
  tenantId: string,
  id: string,
  actor: Actor,
  /** A preview's removal is its own event (previews/service.ts). */
  eventType = "application.deleted",
) {
  const row = await getApplication(db, tenantId, id);
  await audited(db, row, eventType, { ...actor }, async (trx) => {
    await trx("application_fqdns").where({ application_id: row.id }).delete();
    await trx("application_route_state").where({ application_id: row.id }).delete();
    await trx("application_env").where({ application_id: row.id }).delete();
    await trx("application_preview_env").where({ application_id: row.id }).delete();
    await trx("application_containers").where({ application_id: row.id }).delete();
    // Its containers and images are removed by its agent: pending until it reports them gone (cleanup.ts).
    const server = await trx("servers").where({ id: row.server_id }).first<{ name: string }>("name");
    const cleanup = pendingCleanupRow({
      tenantId,
      server: { id: row.server_id, name: server?.name ?? "" },
      applicationId: row.id,
      applicationName: row.name,
    });
    await trx("application_cleanups").insert(cleanup).onConflict(["application_id", "server_id"]).merge();
    // A fleet's other servers too (fleets/placement.ts): each cleans up what it ran.
    for (const s of await fleetMembersOf(trx, row)) {
      const other = pendingCleanupRow({
        tenantId,
        server: s,
        applicationId: row.id,
        applicationName: row.name,
      });
      await trx("application_cleanups").insert(other).onConflict(["application_id", "server_id"]).merge();
    }
    await trx("applications").where({ id: row.id }).delete();
  });
  return row;
}

/**
 * Ids of the applications that exist on a server, a fleet's too (the agent prunes routes of any
 * other). The two reads go side by side: on a route sync's path, one round trip instead of two.
 */
export async function applicationIdsOfServer(db: Knex, serverId: string): Promise<string[]> {
  const [rows, fleet] = await Promise.all([
    db("applications").where({ server_id: serverId }).select<{ id: string }[]>("id"),
    fleetApplicationIdsOn(db, serverId),
  ]);
  return [...rows.map((r) => r.id), ...fleet];
}

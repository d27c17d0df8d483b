// Preview rows: a preview is an application row, a child of the production one
// (preview_of), on the parent's server, with the parent's build and port and
// its own name (`<parent>-<key>`), container name, hostname and env. Writing it
// here (not through applications/store.ts's create) keeps the audit events the
// preview's own (preview.created / preview.updated).
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import type { AppsUrl } from "../applications/app-url.js";
import { checkDefaultHost } from "../applications/hosts.js";
import { parseBuild } from "../applications/source.js";
import type { ApplicationRow } from "../applications/store.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { imageRegistry } from "../deployments/job.js";
import { RcError } from "../errors.js";
import { isUuid } from "../http/validation.js";
import { previewHost, previewSettings } from "./settings.js";

export type PreviewSource = "github" | "gitlab" | "gitea" | "api";

export interface PreviewRow extends ApplicationRow {
  preview_of: string | null;
  preview_key: string | null;
  preview_number: number | null;
  preview_source: PreviewSource | null;
  preview_head_ref: string | null;
  preview_head_sha: string | null;
  preview_from_fork: number | boolean;
  preview_url: string | null;
  preview_last_activity_at: number | null;
  preview_comment_id: number | null;
  previews: string | null;
}

/** What a preview is opened or updated from. */
export interface PreviewSpec {
  key: string;
  number: number | null;
  source: PreviewSource;
  headRef: string;
  headSha: string | null;
  fromFork: boolean;
  url: string | null;
  /** An API preview of an image the caller built: the child's build is that image. */
  image: string | null;
  /** The registry credential that pulls `image` (checked as the tenant's by the route). */
  registryCredentialId?: string | null;
}

/** The fleet columns (fleets/app-fields.ts) a preview does not take from its parent. */
const FLEET_COLUMNS = ["placement", "rollout_strategy"];

/** Application names are at most 128 characters (applications-api.ts). */
const NAME_MAX = 128;
const CONTAINER_MAX = 255;

export const previewName = (parent: { name: string }, key: string) =>
  `${parent.name.slice(0, NAME_MAX - key.length - 1)}-${key}`;

/** A production application of the tenant (404 for an unknown one; a preview's previews are 409). */
export async function getParent(db: Knex, tenantId: string, id: string): Promise<PreviewRow> {
  const row = isUuid(id)
    ? await db("applications").where({ id: id.toLowerCase(), tenant_id: tenantId }).first<PreviewRow>()
    : undefined;
  if (!row) throw new RcError("RC_ERR_APPLICATION_NOT_FOUND", `application '${id}' not found`);
  return row;
}

export async function listPreviewRows(db: Knex, parentId: string): Promise<PreviewRow[]> {
  return db("applications")
    .where({ preview_of: parentId })
    .orderBy([
      { column: "created_at", order: "desc" },
      { column: "id", order: "desc" },
    ])
    .select<PreviewRow[]>("*");
}

export async function getPreviewRow(db: Knex, parent: PreviewRow, previewId: string): Promise<PreviewRow> {
  const row = isUuid(previewId)
    ? await db("applications")
        .where({ id: previewId.toLowerCase(), preview_of: parent.id })
        .first<PreviewRow>()
    : undefined;
  if (!row)
    throw new RcError("RC_ERR_PREVIEW_NOT_FOUND", `preview '${previewId}' of '${parent.name}' not found`);
  return row;
}

export async function previewByKey(db: Knex, parentId: string, key: string) {
  return db("applications").where({ preview_of: parentId, preview_key: key }).first<PreviewRow | undefined>();
}

/**
 * The build a preview runs: the parent's, or the image an API preview names,
 * pulled with the credential the request names or else, when the image is on
 * the registry the parent's own image comes from, the parent's credential (a
 * pipeline's preview image usually sits beside its production image).
 */
function childBuild(parent: PreviewRow, spec: PreviewSpec): string | null {
  if (!spec.image) return parent.build;
  let credential = spec.registryCredentialId ?? null;
  const own = parseBuild(parent.build);
  if (!credential && own?.type === "image" && imageRegistry(own.image) === imageRegistry(spec.image))
    credential = own.registry_credential_id;
  return JSON.stringify({ type: "image", image: spec.image, registry_credential_id: credential });
}

/**
 * Creates the preview's row or brings it up to date (new head, activity);
 * audited as preview.created or preview.updated with the actor and reason.
 */
export async function upsertPreview(
  db: Knex,
  appsUrl: AppsUrl | undefined,
  parent: PreviewRow,
  spec: PreviewSpec,
  actor: Record<string, unknown>,
): Promise<{ row: PreviewRow; created: boolean }> {
  const settings = previewSettings(parent.previews);
  const now = Date.now();
  const existing = await previewByKey(db, parent.id, spec.key);
  const host = previewHost(settings, parent, spec.key, spec.number);
  // A fork's code never gets the repository's stored credential (supply-chain rule).
  const credential = spec.fromFork
    ? { git_username: null, git_password_sealed: null, git_credential_updated_at: null }
    : {
        git_username: parent.git_username,
        git_password_sealed: parent.git_password_sealed,
        git_credential_updated_at: parent.git_credential_updated_at,
      };
  const fields = {
    ...credential,
    git_repository: spec.image ? null : parent.git_repository,
    build: childBuild(parent, spec),
    container_port: parent.container_port,
    health_check_path: parent.health_check_path,
    health_check_timeout_seconds: parent.health_check_timeout_seconds,
    github_repository_id: spec.image ? null : (parent.github_repository_id ?? null),
    fqdns: JSON.stringify(host ? [host] : []),
    preview_number: spec.number,
    preview_source: spec.source,
    preview_head_ref: spec.headRef.slice(0, 255),
    preview_head_sha: spec.headSha,
    preview_from_fork: spec.fromFork,
    preview_url: spec.url,
    preview_last_activity_at: now,
    updated_at: now,
  };
  const eventType = existing ? "preview.updated" : "preview.created";
  const row: PreviewRow = existing
    ? { ...existing, ...fields }
    : {
        ...parent,
        ...fields,
        id: randomUUID(),
        name: previewName(parent, spec.key),
        linked_container_name: `${parent.linked_container_name.slice(0, CONTAINER_MAX - spec.key.length - 1)}-${spec.key}`,
        pin_port: false,
        deploy_branch: parent.deploy_branch,
        auto_deploy: false,
        keep_releases: 1,
        deploy_tags: null,
        watch_paths: null,
        previews: null,
        preview_of: parent.id,
        preview_key: spec.key,
        preview_comment_id: null,
        // A preview runs on its parent's server only: a fleet's placement is not its own.
        ...Object.fromEntries(FLEET_COLUMNS.filter((c) => c in parent).map((c) => [c, null])),
        created_at: now,
      };
  await db.transaction(async (trx) => {
    if (!existing) {
      const taken = await trx("applications")
        .where({ tenant_id: parent.tenant_id, name: row.name })
        .first("id");
      if (taken)
        throw new RcError(
          "RC_ERR_APPLICATION_NAME_TAKEN",
          `name: the preview's name '${row.name}' is another application's: rename that one or use another preview name`,
        );
    }
    await checkDefaultHost(trx, appsUrl, row, { name: !existing, fqdns: true });
    if (existing) await trx("applications").where({ id: row.id }).update(fields);
    else await trx("applications").insert(row);
    await trx("application_fqdns").where({ application_id: row.id }).delete();
    if (host) {
      const holder = await trx("application_fqdns")
        .where({ server_id: row.server_id, fqdn: host })
        .first("application_id");
      if (holder)
        throw new RcError("RC_ERR_FQDN_TAKEN", `the preview's hostname '${host}' is another application's`);
      await trx("application_fqdns").insert({ server_id: row.server_id, fqdn: host, application_id: row.id });
    }
    await syncPreviewEnv(trx, parent, row.id, spec.fromFork);
    await appendAuditEvent(trx, {
      tenantId: parent.tenant_id,
      eventType,
      serverId: parent.server_id,
      payload: {
        application_id: parent.id,
        application_name: parent.name,
        preview_id: row.id,
        preview_name: row.name,
        key: spec.key,
        number: spec.number,
        source: spec.source,
        head_ref: spec.headRef,
        head_sha: spec.headSha,
        from_fork: spec.fromFork,
        image: spec.image,
        ...actor,
      },
    });
  });
  return { row, created: !existing };
}

/**
 * The preview's env (its application_env rows, which its deployments read): for
 * each of production's names, the preview value if one is set, else the
 * production value only when copy_secrets is on, else nothing. A fork's preview
 * gets none at all. Sealed values are copied as they are (one master key).
 */
export async function syncPreviewEnv(
  trx: Knex.Transaction,
  parent: PreviewRow,
  childId: string,
  fromFork: boolean,
): Promise<void> {
  await trx("application_env").where({ application_id: childId }).delete();
  if (fromFork) return;
  const settings = previewSettings(parent.previews);
  type Env = { name: string; value_sealed: string };
  const prod = await trx("application_env")
    .where({ application_id: parent.id })
    .select<Env[]>("name", "value_sealed");
  const preview = new Map(
    (
      await trx("application_preview_env")
        .where({ application_id: parent.id })
        .select<Env[]>("name", "value_sealed")
    ).map((r) => [r.name, r.value_sealed]),
  );
  const now = Date.now();
  const rows = prod.flatMap((p) => {
    const value = preview.get(p.name) ?? (settings.copy_secrets ? p.value_sealed : undefined);
    return value === undefined
      ? []
      : [{ application_id: childId, name: p.name, value_sealed: value, updated_at: now }];
  });
  if (rows.length > 0) await trx("application_env").insert(rows);
}

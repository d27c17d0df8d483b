// An application's environment variables: write-only. Each value is sealed with
// the master key (AES-256-GCM, registry/crypto.ts) and opened only to build a
// deployment's job, or a log read's (the agent scrubs them from its output);
// reads show names and when each was set, never a value.
// The same bound as a request's env holds for the stored set (200 names, 64 KB
// of names and values), so a deployment's env always fits what an agent takes.
// Changes are audited by name only. Two sets live by these rules: production's
// (application_env) and the values previews get (application_preview_env,
// previews/store.ts says who gets what); each function takes the set.
import type { Knex } from "knex";
import { LIMITS, envBytes } from "../http/schemas.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { iso } from "../lib/time.js";
import { open, seal } from "../registry/crypto.js";
import { requireMasterKey } from "../registry/credentials.js";
import type { Actor, ApplicationRow } from "./store.js";

interface EnvRow {
  name: string;
  value_sealed: string;
  updated_at: number;
}

export interface EnvListing {
  variables: { name: string; updated_at: string | null }[];
}

/** One stored set of an application's variables. */
export interface EnvSet {
  table: "application_env" | "application_preview_env";
  /** Audit event types: `<events>_set`, `<events>_unset`. */
  events: "application.env" | "application.preview_env";
  /** What a 404 calls one of them. */
  noun: string;
}

export const PRODUCTION_ENV: EnvSet = {
  table: "application_env",
  events: "application.env",
  noun: "environment variable",
};
export const PREVIEW_ENV: EnvSet = {
  table: "application_preview_env",
  events: "application.preview_env",
  noun: "preview environment variable",
};

export async function listEnv(db: Knex, applicationId: string, set = PRODUCTION_ENV): Promise<EnvListing> {
  const rows = await db(set.table)
    .where({ application_id: applicationId })
    .orderBy("name", "asc")
    .select<EnvRow[]>("name", "updated_at");
  return { variables: rows.map((r) => ({ name: r.name, updated_at: iso(Number(r.updated_at)) })) };
}

/** The values, for a deployment's job, and for a log read to scrub (logs-api.ts). */
export async function openEnv(db: Knex, masterKey: Buffer, applicationId: string, set = PRODUCTION_ENV) {
  const rows = await db(set.table)
    .where({ application_id: applicationId })
    .select<EnvRow[]>("name", "value_sealed");
  return Object.fromEntries(rows.map((r) => [r.name, open(masterKey, r.value_sealed)]));
}

function audit(trx: Knex.Transaction, app: ApplicationRow, eventType: string, names: string[], actor: Actor) {
  return appendAuditEvent(trx, {
    tenantId: app.tenant_id,
    eventType,
    serverId: app.server_id,
    payload: { application_id: app.id, application_name: app.name, names, ...actor },
  });
}

/** Adds or replaces `vars`; 422 when the stored set would pass the bound. */
export async function setEnv(
  db: Knex,
  masterKey: Buffer | undefined,
  app: ApplicationRow,
  vars: Record<string, string>,
  actor: Actor,
  set = PRODUCTION_ENV,
): Promise<EnvListing> {
  const key = requireMasterKey(masterKey);
  const names = Object.keys(vars).sort();
  if (names.length === 0)
    throw new RcError("RC_ERR_VALIDATION", "variables: must name at least one variable");
  await db.transaction(async (trx) => {
    const current = await trx(set.table)
      .where({ application_id: app.id })
      .forUpdate()
      .select<EnvRow[]>("name", "value_sealed");
    const merged: Record<string, string> = {};
    // Sizes only need lengths: open nothing that is not being replaced.
    for (const r of current) merged[r.name] = r.name in vars ? "" : open(key, r.value_sealed);
    Object.assign(merged, vars);
    const count = Object.keys(merged).length;
    if (count > LIMITS.envKeys)
      throw new RcError(
        "RC_ERR_VALIDATION",
        `variables: an application has at most ${LIMITS.envKeys} (would be ${count})`,
      );
    const size = envBytes(merged);
    if (size > LIMITS.envBytes)
      throw new RcError(
        "RC_ERR_VALIDATION",
        `variables: names and values total ${size} bytes, over the ${LIMITS.envBytes}-byte bound`,
      );
    const now = Date.now();
    await trx(set.table).where({ application_id: app.id }).whereIn("name", names).delete();
    await trx(set.table).insert(
      names.map((name) => ({
        application_id: app.id,
        name,
        value_sealed: seal(key, vars[name]!),
        updated_at: now,
      })),
    );
    await audit(trx, app, `${set.events}_set`, names, actor);
  });
  return listEnv(db, app.id, set);
}

export async function unsetEnv(
  db: Knex,
  app: ApplicationRow,
  name: string,
  actor: Actor,
  set = PRODUCTION_ENV,
): Promise<void> {
  await db.transaction(async (trx) => {
    const n = await trx(set.table).where({ application_id: app.id, name }).delete();
    if (n === 0) throw new RcError("RC_ERR_ENV_VAR_NOT_FOUND", `${set.noun} '${name}' is not set`);
    await audit(trx, app, `${set.events}_unset`, [name], actor);
  });
}

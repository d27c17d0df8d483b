// A production application's preview env: values its previews get instead of
// production's, for production's names (previews/store.ts syncPreviewEnv says
// who gets what). Write-only and sealed like application_env (env.ts); reads
// show names only; changes are audited by name. A preview picks a change up
// at its next deployment.
import type { Knex } from "knex";
import type { EnvListing } from "../applications/env.js";
import type { Actor, ApplicationRow } from "../applications/store.js";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { LIMITS } from "../http/schemas.js";
import { iso } from "../lib/time.js";
import { seal } from "../registry/crypto.js";
import { requireMasterKey } from "../registry/credentials.js";

export async function listPreviewEnv(db: Knex, applicationId: string): Promise<EnvListing> {
  const rows = await db("application_preview_env")
    .where({ application_id: applicationId })
    .orderBy("name", "asc")
    .select<{ name: string; updated_at: number }[]>("name", "updated_at");
  return { variables: rows.map((r) => ({ name: r.name, updated_at: iso(Number(r.updated_at)) })) };
}

function audit(trx: Knex.Transaction, app: ApplicationRow, eventType: string, names: string[], actor: Actor) {
  return appendAuditEvent(trx, {
    tenantId: app.tenant_id,
    eventType,
    serverId: app.server_id,
    payload: { application_id: app.id, application_name: app.name, names, ...actor },
  });
}

export async function setPreviewEnv(
  db: Knex,
  masterKey: Buffer | undefined,
  app: ApplicationRow,
  vars: Record<string, string>,
  actor: Actor,
): Promise<EnvListing> {
  const key = requireMasterKey(masterKey);
  const names = Object.keys(vars).sort();
  if (names.length === 0)
    throw new RcError("RC_ERR_VALIDATION", "variables: must name at least one variable");
  await db.transaction(async (trx) => {
    const others = await trx("application_preview_env")
      .where({ application_id: app.id })
      .whereNotIn("name", names)
      .count<{ n: number }[]>({ n: "*" });
    const count = Number(others[0]?.n ?? 0) + names.length;
    if (count > LIMITS.envKeys)
      throw new RcError(
        "RC_ERR_VALIDATION",
        `variables: an application has at most ${LIMITS.envKeys} (would be ${count})`,
      );
    const now = Date.now();
    await trx("application_preview_env").where({ application_id: app.id }).whereIn("name", names).delete();
    await trx("application_preview_env").insert(
      names.map((name) => ({
        application_id: app.id,
        name,
        value_sealed: seal(key, vars[name]!),
        updated_at: now,
      })),
    );
    await audit(trx, app, "application.preview_env_set", names, actor);
  });
  return listPreviewEnv(db, app.id);
}

export async function unsetPreviewEnv(
  db: Knex,
  app: ApplicationRow,
  name: string,
  actor: Actor,
): Promise<void> {
  await db.transaction(async (trx) => {
    const n = await trx("application_preview_env").where({ application_id: app.id, name }).delete();
    if (n === 0)
      throw new RcError("RC_ERR_ENV_VAR_NOT_FOUND", `preview environment variable '${name}' is not set`);
    await audit(trx, app, "application.preview_env_unset", [name], actor);
  });
}

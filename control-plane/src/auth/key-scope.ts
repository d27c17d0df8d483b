// Validation of an automation key's scope fields beyond what the JSON schema can
// say: servers and credentials must belong to the caller's tenant, allowlist
// entries must be addresses or CIDR ranges, expiry must be in the future.
// Every refusal is a 422 whose detail names the field and the bad entry.
import type { Knex } from "knex";
import { parseAllowlistEntry } from "./ip-allowlist.js";
import { RcError } from "../errors.js";

/** A key's operation scope names (operations/types.ts owns them). */
export { OPERATION_SCOPES as OPERATIONS } from "../operations/types.js";

export interface ScopeInput {
  servers?: string[];
  operations?: string[];
  allowed_credential_ids?: string[];
  ip_allowlist?: string[];
  expires_at?: string | null;
}

const invalid = (detail: string) => new RcError("RC_ERR_VALIDATION", detail);

/** A date-time (its format is the route's schema's) in the future → epoch ms; null clears it. */
export function parseExpiry(value: string | null | undefined): number | null | undefined {
  if (value === undefined || value === null) return value;
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw invalid(`expires_at: '${value}' is not an ISO 8601 date-time with a time zone`);
  if (ms <= Date.now()) throw invalid(`expires_at: '${value}' is in the past`);
  return ms;
}

export function checkIpAllowlist(entries: string[]): string[] {
  for (const entry of entries) {
    if (!parseAllowlistEntry(entry))
      throw invalid(`ip_allowlist: '${entry}' is not an IPv4/IPv6 address or CIDR range`);
  }
  return entries.map((e) => e.trim());
}

async function checkTenantIds(db: Knex, table: string, field: string, tenantId: string, ids: string[]) {
  const wanted = [...new Set(ids.map((id) => id.toLowerCase()))];
  if (wanted.length === 0) return wanted;
  const found = new Set(
    (await db(table).where({ tenant_id: tenantId }).whereIn("id", wanted).select("id")).map((r) =>
      String(r.id).toLowerCase(),
    ),
  );
  const missing = wanted.find((id) => !found.has(id));
  if (missing)
    throw invalid(
      `${field}: '${missing}' is not a ${table.replace(/_/g, " ").replace(/s$/, "")} of this tenant`,
    );
  return wanted;
}

/** The stored (JSON) form of the scope fields present in `input`. */
export async function compileScope(db: Knex, tenantId: string, input: ScopeInput) {
  const out: Record<string, unknown> = {};
  if (input.servers !== undefined)
    out.servers = JSON.stringify(await checkTenantIds(db, "servers", "servers", tenantId, input.servers));
  if (input.operations !== undefined) out.operations = JSON.stringify([...new Set(input.operations)]);
  if (input.allowed_credential_ids !== undefined)
    out.allowed_credential_ids = JSON.stringify(
      await checkTenantIds(
        db,
        "registry_credentials",
        "allowed_credential_ids",
        tenantId,
        input.allowed_credential_ids,
      ),
    );
  if (input.ip_allowlist !== undefined)
    out.ip_allowlist = JSON.stringify(checkIpAllowlist(input.ip_allowlist));
  if (input.expires_at !== undefined) out.expires_at = parseExpiry(input.expires_at);
  return out;
}

// The dev tenant's first person: while it has no user, each `make dev` prints a one-time link
// that creates the owner account (the person picks the password; there is no default one).
// It is an ordinary invite (control-plane/src/accounts/invites.ts: single use, stored only as
// SHA-256, audited as user.invited), cut to a short life because it is printed on a terminal;
// the links of earlier runs are expired so only the newest works. The token is returned to be
// printed in the banner and is written nowhere else.
import { createRequire } from "node:module";
import { join } from "node:path";

/** How long the printed link works. Invites otherwise last 7 days (INVITE_TTL_MS). */
export const OWNER_LINK_TTL_MS = 60 * 60 * 1000;
const DEFAULT_EMAIL = "you@relayctl.localhost";

/**
 * With the dev tenant's db handle: { email, token } of a fresh owner invite when the tenant
 * has no user yet, else { email: <first owner's>, token: null }.
 */
export async function ownerInvite(db, controlPlaneDist, tenantName) {
  const require = createRequire(import.meta.url);
  const { createInvite } = require(join(controlPlaneDist, "accounts/invites.js"));
  const tenant = await db("tenants").where({ name: tenantName }).first("id");
  if (!tenant) return { email: null, token: null };
  const owner = await db("users")
    .where({ tenant_id: tenant.id, role: "owner" })
    .orderBy("created_at")
    .first("email");
  if (owner) return { email: owner.email, token: null };
  const now = Date.now();
  await db("user_invites")
    .where({ tenant_id: tenant.id, invited_by: "make-dev" })
    .whereNull("used_at")
    .where("expires_at", ">", now)
    .update({ expires_at: now });
  const email = process.env.RELAYCTL_DEV_OWNER_EMAIL || DEFAULT_EMAIL;
  const invite = await createInvite(
    db,
    tenant.id,
    { email, role: "owner" },
    { actor: { key_id: "make-dev" }, via: "make dev" },
  );
  // createInvite has no lifetime parameter; the dev link's is shortened here, in the same table.
  await db("user_invites")
    .where({ id: invite.id })
    .update({ expires_at: now + OWNER_LINK_TTL_MS });
  return { email: invite.email, token: invite.token };
}

// Invites: an owner invites a person by e-mail with a role; the link carries a
// single-use secret (rin_, stored as SHA-256) that expires. Accepting it with a
// password creates the account in the inviting tenant (accounts are per tenant:
// an address used in another tenant is neither refused nor revealed); the
// invite is claimed by a conditional UPDATE, so two tabs racing on one link
// make one account.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { mintToken, sha256Hex } from "../lib/secrets.js";
import { type Role, emailTakenIn, insertUser, normalizeEmail } from "./users.js";

export const INVITE_TTL_MS = 7 * 24 * 3600 * 1000;

interface InviteRow {
  id: string;
  tenant_id: string;
  email: string;
  role: Role;
  expires_at: number;
  used_at: number | null;
}

export async function createInvite(
  db: Knex,
  tenantId: string,
  input: { email: string; role: Role },
  who: Record<string, unknown> & { actor: { user_id?: string; key_id?: string } },
) {
  const email = normalizeEmail(input.email);
  // Only this tenant's people are looked at: an address used in another tenant
  // is invited like any other (issue 30, finding 6: no probe of other tenants).
  if (await emailTakenIn(db, tenantId, email)) throw new RcError("RC_ERR_EMAIL_TAKEN");
  const token = mintToken("rin_");
  const id = randomUUID();
  const expiresAt = Date.now() + INVITE_TTL_MS;
  await db.transaction(async (trx) => {
    await trx("user_invites").insert({
      id,
      tenant_id: tenantId,
      token_hash: sha256Hex(token),
      email,
      role: input.role,
      invited_by: who.actor.user_id ?? who.actor.key_id ?? "operator",
      expires_at: expiresAt,
      created_at: Date.now(),
    });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "user.invited",
      payload: { invite_id: id, email, role: input.role, ...who },
    });
  });
  return { id, email, role: input.role, token, expires_at: new Date(expiresAt).toISOString() };
}

/** The pending invite a token names, or 404 (unknown, used, expired alike). */
export async function findInvite(db: Knex, token: string): Promise<InviteRow> {
  const row = await db("user_invites")
    .where({ token_hash: sha256Hex(token) })
    .first<InviteRow | undefined>("id", "tenant_id", "email", "role", "expires_at", "used_at");
  if (!row || row.used_at !== null || Number(row.expires_at) <= Date.now())
    throw new RcError("RC_ERR_INVITE_INVALID");
  return row;
}

/** Claims the invite and creates its account in one transaction. */
export async function acceptInvite(db: Knex, token: string, password: string, ip: string) {
  const invite = await findInvite(db, token);
  return db.transaction(async (trx) => {
    const claimed = await trx("user_invites")
      .where({ id: invite.id })
      .whereNull("used_at")
      .where("expires_at", ">", Date.now())
      .update({ used_at: Date.now() });
    if (Number(claimed) !== 1) throw new RcError("RC_ERR_INVITE_INVALID");
    const user = await insertUser(trx, invite.tenant_id, {
      email: invite.email,
      role: invite.role,
      password,
    });
    await appendAuditEvent(trx, {
      tenantId: invite.tenant_id,
      eventType: "user.created",
      payload: { user_id: user.id, email: user.email, role: user.role, invite_id: invite.id, ip },
    });
    return user;
  });
}

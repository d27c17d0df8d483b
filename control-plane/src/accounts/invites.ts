// Invites: an owner invites a person by e-mail with a role; the link carries a
// single-use secret (rin_, stored as SHA-256) that expires. Accepting it with a
// password creates the account in the inviting tenant (accounts are per tenant:
// an address used in another tenant is neither refused nor revealed); the
// invite is claimed by a conditional UPDATE, so two tabs racing on one link
// make one account. Pending invites are listed for owners (who invited whom, as
// what, until when) and can be revoked before they are used.
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
  revoked_at: number | null;
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
    .first<InviteRow | undefined>("id", "tenant_id", "email", "role", "expires_at", "used_at", "revoked_at");
  if (!row || row.used_at !== null || row.revoked_at !== null || Number(row.expires_at) <= Date.now())
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
      .whereNull("revoked_at")
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

/** The invites of a tenant still waiting to be used, newest first, with who made each (a person's e-mail or a key's name). */
export async function listPendingInvites(db: Knex, tenantId: string) {
  const rows: {
    id: string;
    email: string;
    role: Role;
    invited_by: string;
    by_email: string | null;
    by_key: string | null;
    expires_at: number;
    created_at: number;
  }[] = await db("user_invites as i")
    .leftJoin("users as u", "u.id", "i.invited_by")
    .leftJoin("api_keys as k", "k.id", "i.invited_by")
    .where({ "i.tenant_id": tenantId })
    .whereNull("i.used_at")
    .whereNull("i.revoked_at")
    .where("i.expires_at", ">", Date.now())
    .orderBy("i.created_at", "desc")
    .select(
      "i.id",
      "i.email",
      "i.role",
      "i.invited_by",
      "u.email as by_email",
      "k.name as by_key",
      "i.expires_at",
      "i.created_at",
    );
  return rows.map((r) => ({
    id: r.id,
    email: r.email,
    role: r.role,
    invited_by: r.by_email ?? (r.by_key ? `API key ${r.by_key}` : r.invited_by),
    created_at: new Date(Number(r.created_at)).toISOString(),
    expires_at: new Date(Number(r.expires_at)).toISOString(),
  }));
}

/** Revokes a pending invite of the tenant (its link stops working), audited; 404 when there is none. */
export async function revokeInvite(
  db: Knex,
  tenantId: string,
  id: string,
  who: Record<string, unknown>,
): Promise<void> {
  await db.transaction(async (trx) => {
    const row = await trx("user_invites")
      .where({ id, tenant_id: tenantId })
      .whereNull("used_at")
      .whereNull("revoked_at")
      .where("expires_at", ">", Date.now())
      .first<{ id: string; email: string; role: Role } | undefined>("id", "email", "role");
    if (!row)
      throw new RcError("RC_ERR_INVITE_INVALID", `invite '${id}' is unknown, used, revoked or expired`);
    const revoked = await trx("user_invites")
      .where({ id })
      .whereNull("used_at")
      .whereNull("revoked_at")
      .update({
        revoked_at: Date.now(),
      });
    // Accepted in the meantime: the account exists, nothing left to revoke.
    if (Number(revoked) !== 1)
      throw new RcError("RC_ERR_INVITE_INVALID", `invite '${id}' is unknown, used, revoked or expired`);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "user.invite_revoked",
      payload: { invite_id: id, email: row.email, role: row.role, ...who },
    });
  });
}

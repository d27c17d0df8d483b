// People of a tenant: one account per e-mail address within the tenant, a role
// (owner, deployer or viewer: auth/roles.ts) with an owner's optional `exec`
// grant, a scrypt password. The operator CLI creates a tenant's first owner; owners
// invite the rest (invites.ts). Every change is audited under the tenant.
import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { RcError } from "../errors.js";
import { hashPassword, passwordProblem } from "./password.js";

import type { Role } from "../auth/roles.js";

export { ROLES, type Role } from "../auth/roles.js";

export interface UserRow {
  id: string;
  tenant_id: string;
  email: string;
  role: Role;
  /** The owner's grant to run commands and registry logins (a boolean; 0/1 in MariaDB and SQLite). */
  can_exec: boolean | number;
  password_hash: string;
  disabled_at: number | null;
  created_at: number;
}

/** The audit trail's view of a person acting (the key_* fields keep one shape for every actor). */
export function userActor(u: { id: string; email: string; role: string }, ip: string | null) {
  return {
    actor: { key_id: u.id, key_name: u.email, key_type: "user", user_id: u.id, email: u.email, role: u.role },
    ip,
  };
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,189}\.[^\s@]{1,63}$/;

export function normalizeEmail(email: string): string {
  const e = email.trim().toLowerCase();
  if (!EMAIL.test(e) || e.length > 254)
    throw new RcError("RC_ERR_VALIDATION", "email: not an e-mail address");
  return e;
}

export function presentUser(u: UserRow) {
  return {
    id: u.id,
    email: u.email,
    role: u.role,
    can_exec: Boolean(u.can_exec),
    tenant_id: u.tenant_id,
    disabled: u.disabled_at !== null,
    created_at: new Date(Number(u.created_at)).toISOString(),
  };
}

/** At most this many accounts of one address are tried at sign-in (each costs a password hash). */
export const MAX_ACCOUNTS_PER_EMAIL = 16;

/**
 * The accounts of an address in every tenant (accounts are per tenant: issue 30,
 * finding 6), with their tenant's name, oldest first: sign-in tries each.
 */
export async function findUsersByEmail(
  db: Knex,
  email: string,
): Promise<(UserRow & { tenant_name: string })[]> {
  return db("users as u")
    .join("tenants as t", "t.id", "u.tenant_id")
    .where({ "u.email": email.trim().toLowerCase() })
    .orderBy("u.created_at", "asc")
    .limit(MAX_ACCOUNTS_PER_EMAIL)
    .select("u.*", "t.name as tenant_name");
}

/** Whether the address has an account in this tenant (never looks at other tenants). */
export async function emailTakenIn(db: Knex, tenantId: string, email: string): Promise<boolean> {
  return (await db("users").where({ tenant_id: tenantId, email }).first("id")) !== undefined;
}

export async function getUser(db: Knex, id: string): Promise<UserRow | undefined> {
  return db("users").where({ id }).first<UserRow | undefined>();
}

export async function listUsers(db: Knex, tenantId: string): Promise<UserRow[]> {
  return db("users").where({ tenant_id: tenantId }).orderBy("created_at", "asc");
}

/** Inserts a user inside `trx` (the caller audits); 409 when the e-mail has an account in this tenant. */
export async function insertUser(
  trx: Knex.Transaction,
  tenantId: string,
  input: { email: string; role: Role; password: string },
): Promise<UserRow> {
  const email = normalizeEmail(input.email);
  const problem = passwordProblem(input.password);
  if (problem) throw new RcError("RC_ERR_VALIDATION", problem);
  if (await emailTakenIn(trx, tenantId, email)) throw new RcError("RC_ERR_EMAIL_TAKEN");
  const row: UserRow = {
    id: randomUUID(),
    tenant_id: tenantId,
    email,
    role: input.role,
    can_exec: false,
    password_hash: await hashPassword(input.password),
    disabled_at: null,
    created_at: Date.now(),
  };
  await trx("users").insert(row);
  return row;
}

/** The operator's way in: a user with the owner role (the first of a tenant). */
export async function createOwner(db: Knex, tenantId: string, email: string, password: string) {
  return db.transaction(async (trx) => {
    const user = await insertUser(trx, tenantId, { email, role: "owner", password });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "user.created",
      payload: { user_id: user.id, email: user.email, role: user.role, actor: { key_type: "operator_cli" } },
    });
    return user;
  });
}

/**
 * Disables a user of `tenantId` and revokes everything they hold (web sessions,
 * OAuth tokens) in the same transaction, so their next request is refused.
 */
export async function disableUser(db: Knex, tenantId: string, userId: string, who: Record<string, unknown>) {
  const user = await db("users").where({ id: userId, tenant_id: tenantId }).first<UserRow | undefined>();
  if (!user) throw new RcError("RC_ERR_USER_NOT_FOUND");
  const now = Date.now();
  await db.transaction(async (trx) => {
    await trx("users").where({ id: user.id }).whereNull("disabled_at").update({ disabled_at: now });
    await trx("web_sessions").where({ user_id: user.id }).whereNull("revoked_at").update({ revoked_at: now });
    await trx("oauth_tokens").where({ user_id: user.id }).whereNull("revoked_at").update({ revoked_at: now });
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "user.disabled",
      payload: { user_id: user.id, email: user.email, ...who },
    });
  });
  return presentUser({ ...user, disabled_at: now });
}

/**
 * An owner changes a person's role or `exec` grant (audited as user.changed).
 * The tenant keeps one enabled owner at least: the last one cannot step down
 * (409), or nobody could manage it again.
 */
export async function changeUser(
  db: Knex,
  tenantId: string,
  userId: string,
  change: { role?: Role; can_exec?: boolean },
  who: Record<string, unknown>,
) {
  return db.transaction(async (trx) => {
    const user = await trx("users")
      .where({ id: userId, tenant_id: tenantId })
      .forUpdate()
      .first<UserRow | undefined>();
    if (!user) throw new RcError("RC_ERR_USER_NOT_FOUND");
    const next = { role: change.role ?? user.role, can_exec: change.can_exec ?? Boolean(user.can_exec) };
    if (user.role === "owner" && next.role !== "owner") {
      const owners = await trx("users")
        .where({ tenant_id: tenantId, role: "owner" })
        .whereNull("disabled_at")
        .forUpdate()
        .select("id");
      if (owners.length <= 1) throw new RcError("RC_ERR_LAST_OWNER");
    }
    await trx("users").where({ id: user.id }).update(next);
    await appendAuditEvent(trx, {
      tenantId,
      eventType: "user.changed",
      payload: {
        user_id: user.id,
        email: user.email,
        role: next.role,
        can_exec: next.can_exec,
        previous: { role: user.role, can_exec: Boolean(user.can_exec) },
        ...who,
      },
    });
    return presentUser({ ...user, ...next });
  });
}

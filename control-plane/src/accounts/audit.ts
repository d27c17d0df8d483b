// Sign-in events in the audit trail: every sign-in, failure and sign-out, under
// the tenant of the account named. A failure for an e-mail with no account has
// no tenant to be filed under (and recording it would let anyone write into a
// chain): it is logged only.
import type { FastifyBaseLogger } from "fastify";
import type { Knex } from "knex";
import { appendAuditEvent } from "../audit/audit-log.js";
import { type UserRow, userActor } from "./users.js";

export async function auditUserEvent(
  db: Knex,
  log: FastifyBaseLogger,
  user: Pick<UserRow, "id" | "email" | "role" | "tenant_id">,
  ip: string,
  eventType: string,
  payload: Record<string, unknown> = {},
): Promise<void> {
  try {
    await db.transaction((trx) =>
      appendAuditEvent(trx, {
        tenantId: user.tenant_id,
        eventType,
        keyId: user.id,
        payload: { ...userActor(user, ip), ...payload },
      }),
    );
  } catch (err) {
    log.warn({ err, eventType, userId: user.id }, "audit: could not record a sign-in event");
  }
}

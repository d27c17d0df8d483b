// A sync's last commit, for what no operation's completion settled (settle.ts):
// the claims not used and the audit events of the entries, together: one commit,
// never one without the others. On MySQL in two round trips on a connection held for it:
// (1) START TRANSACTION and the tenant's chain head locked (every append's lock
// order: the head first, then rows); (2) every write, the chained events, the
// head's move and COMMIT as one multi-statement, which the server runs in order
// and stops at the first error (the transaction is then rolled back here, so
// nothing of it lands). A knex transaction sent BEGIN and COMMIT on their own:
// two round trips more. Elsewhere (SQLite) the knex transaction as before.
import type { Knex } from "knex";
import {
  type AuditEventInput,
  type Write,
  chainRows,
  chainWrites,
  lockChainHead,
  sendInOrder,
  writeChainedEvents,
} from "../audit/audit-log.js";
import { noteChainHead } from "../audit/group-commit.js";
import { isMysql, queryOn } from "../db/statement.js";

const LOCK_HEAD = "SELECT `head`, `seq` FROM `audit_chain_heads` WHERE `tenant_id` = ? FOR UPDATE";

/** Commits `writes(db)` with `events` (one tenant's, in order) chained after its head. */
export async function commitWithEvents(
  db: Knex,
  tenantId: string,
  writes: (q: Knex | Knex.Transaction) => Write[],
  events: AuditEventInput[],
): Promise<void> {
  if (events.some((e) => e.tenantId !== tenantId)) throw new Error("audit: one commit, one tenant");
  if (!isMysql(db)) {
    await db.transaction(async (trx) => {
      await writeChainedEvents(trx, await lockChainHead(trx, tenantId), events, writes(trx));
    });
    return;
  }
  const conn = await db.client.acquireConnection();
  let open = false;
  try {
    open = true;
    const [results] = (await queryOn(db, conn, `START TRANSACTION;\n${LOCK_HEAD}`, [tenantId])) as [
      unknown[],
      unknown,
    ];
    const head = (results[1] as { head: string | null; seq: number | string }[])[0];
    if (!head) throw new Error(`audit: tenant ${tenantId} has no audit chain`);
    const chained = chainRows({ head: head.head, seq: Number(head.seq) }, events);
    await sendInOrder(db, [...writes(db), ...chainWrites(tenantId, chained)], conn, "COMMIT");
    open = false;
    // The head this process left: the next audited write of the tenant may commit on it in one round trip.
    noteChainHead(db, tenantId, { head: chained.head, seq: chained.seq });
  } finally {
    try {
      if (open) await queryOn(db, conn, "ROLLBACK");
    } catch {
      // A broken connection: the server rolls back when it goes.
    }
    await db.client.releaseConnection(conn);
  }
}

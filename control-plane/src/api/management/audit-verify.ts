// GET /api/audit/verify — the audit chain's verification state of the caller's
// tenant, for the dashboard's Activity page: the same walk as
// `admin audit verify` (audit/verify.ts: links, HMACs, stored results against
// their completion events), answered as {ok, events, head_seq, detail?}.
import type { Knex } from "knex";
import { auditKeys } from "../../audit/chain-key.js";
import { verifyTenantChain } from "../../audit/verify.js";
import { isSqlite } from "../../db/knex.js";
import type { ApiContext } from "../../http/context.js";
import { MANAGEMENT, type RouteSpec, route } from "../../http/route.js";

export const auditVerifyRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "GET",
    url: "/api/audit/verify",
    access: { credentials: MANAGEMENT },
    tag: "management",
    handler: async (req) => {
      const tenantId = req.principal.tenantId;
      // A live chain grows while it is walked: on MySQL the walk and the head are
      // read in one transaction's consistent snapshot, else new events would read
      // as "removed from the end". (SQLite, dev only, has one connection: a
      // transaction would hold every other request for the walk.)
      const walk = (db: Knex) => verifyWithHead(db, tenantId);
      return isSqlite(ctx.db) ? walk(ctx.db) : ctx.db.transaction(walk);
    },
  }),
];

async function verifyWithHead(db: Knex, tenantId: string) {
  const report = await verifyTenantChain(db, tenantId, auditKeys());
  const head = await db("audit_chain_heads").where({ tenant_id: tenantId }).first<{ seq: number }>("seq");
  const headSeq = Number(head?.seq ?? 0);
  if (report.ok) return { ok: true, events: report.events, head_seq: headSeq };
  return {
    ok: false,
    events: report.events_checked,
    head_seq: headSeq,
    detail: `event ${report.seq}: ${report.problem}`,
  };
}

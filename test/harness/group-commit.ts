// What the tests of audited writes on a real MariaDB share (audit-group-commit*.test.ts,
// external-deploy-claims.test.ts): the file's own MariaDB and audit keys, a fresh database with a
// tenant and a server, an exec started and its result, the audit events per operation, the chain
// head as an admission reads it, and the statements a pool sends meanwhile.
import { randomBytes, randomUUID } from "node:crypto";
import type { TestFn } from "ava";
import type { Knex } from "knex";
import { resolveAuditKeys, useAuditKeys } from "../../control-plane/src/audit/chain-key";
import { createTenant } from "../../control-plane/src/cli/admin";
import { migrate, openDb } from "../../control-plane/src/db/knex";
import { createOperation } from "../../control-plane/src/operations/store";
import { cleanupAll } from "./cleanup";
import { type OwnedMariaDbServer, startOwned } from "./mariadb";

/**
 * Registers the file's hooks: audit keys of its own (in use before its tests), a MariaDB of its
 * own, everything cleaned up after. `server()` is that MariaDB once the tests run.
 */
export function ownedAuditDatabase(test: TestFn) {
  const keys = resolveAuditKeys({
    databaseUrl: "mysql://",
    auditHmacKey: randomBytes(32).toString("base64"),
  })!;
  let owned: OwnedMariaDbServer | undefined;
  test.before(async () => {
    useAuditKeys(keys);
    owned = await startOwned();
  });
  test.after.always(cleanupAll);
  const server = () => {
    if (!owned) throw new Error("the MariaDB is not started yet (test.before)");
    return owned;
  };
  return { keys, server };
}

/** Migrates `db` and gives it a tenant and one server. */
export async function setup(db: Knex) {
  await migrate(db);
  const tenant = await createTenant(db, `t-${randomUUID().slice(0, 8)}`);
  const serverId = randomUUID();
  await db("servers").insert({
    id: serverId,
    tenant_id: tenant.tenant_id,
    name: "s1",
    created_at: Date.now(),
  });
  return { tenantId: tenant.tenant_id, serverId };
}

/** A fresh database of `server` with a tenant and a server, given to `body`, closed afterwards. */
export async function inFreshDatabase(
  server: OwnedMariaDbServer,
  body: (db: Knex, tenantId: string, serverId: string) => Promise<void>,
) {
  const db = openDb((await server.createDatabase()).url);
  try {
    const { tenantId, serverId } = await setup(db);
    await body(db, tenantId, serverId);
  } finally {
    await db.destroy();
  }
}

/**
 * Two instances (two connection pools, each with its own group committer) on one fresh database
 * of `server`, with a tenant and a server, given to `body`; both closed afterwards.
 */
export async function inTwoInstances(
  server: OwnedMariaDbServer,
  body: (a: Knex, b: Knex, tenantId: string, serverId: string) => Promise<void>,
) {
  const url = (await server.createDatabase()).url;
  const a = openDb(url);
  const b = openDb(url);
  try {
    const { tenantId, serverId } = await setup(a);
    await body(a, b, tenantId, serverId);
  } finally {
    await a.destroy();
    await b.destroy();
  }
}

/** An exec of `true` started on the server, as the api starts one. */
export const start = (db: Knex, tenantId: string, serverId: string) =>
  createOperation(db, {
    tenantId,
    serverId,
    operationType: "exec",
    keyId: null,
    runId: null,
    leaseMs: 60_000,
    deadlineAt: Date.now() + 60_000,
    audit: { command: "true" },
  });

export const done = { status: "completed" as const, exit_code: 0, stdout: "ok", stderr: "", duration_ms: 1 };

/** Operation id → the types of its audit events, sorted. */
export async function eventCounts(db: Knex, tenantId: string) {
  const rows = await db("audit_events")
    .where({ tenant_id: tenantId })
    .select("operation_id", "event_type")
    .whereNotNull("operation_id");
  const per = new Map<string, string[]>();
  for (const r of rows) per.set(r.operation_id, [...(per.get(r.operation_id) ?? []), r.event_type].sort());
  return per;
}

/** The tenant's chain head as admission reads it (outside any lock). */
export async function readHead(db: Knex, tenantId: string) {
  const h = await db("audit_chain_heads").where({ tenant_id: tenantId }).first("head", "seq");
  return { head: h.head as string | null, seq: Number(h.seq) };
}

/** Statements `db` sends while `body` runs (knex's query events: also queryOn's). */
export async function statementsDuring(db: Knex, body: () => Promise<unknown>): Promise<string[]> {
  const sent: string[] = [];
  const listen = (q: { sql: string }) => sent.push(q.sql);
  db.on("query", listen);
  try {
    await body();
  } finally {
    db.off("query", listen);
  }
  return sent;
}

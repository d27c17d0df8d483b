// The MySQL connection allows several statements per round trip (the audit
// append sends its writes together, audit-log.ts), so SQL injection there would
// be stacked-query injection. Every statement binds its values; this shows that
// hostile values, the stacked kind included, are stored as data and run nothing
// — also on a server whose sql_mode has NO_BACKSLASH_ESCAPES, under which the
// client's backslash escaping of quotes would end a string literal early.
import test from "ava";
import { createAutomationKey, createTenant } from "../control-plane/src/cli/admin";
import { randomBytes, randomUUID } from "node:crypto";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { countRequest } from "../control-plane/src/auth/rate-limit";
import { migrate, openDb } from "../control-plane/src/db/knex";
import { finishOperation } from "../control-plane/src/operations/finish";
import { createOperation } from "../control-plane/src/operations/store";
import { cleanupAll } from "./harness/cleanup";
import { type OwnedMariaDbServer, startOwned } from "./harness/mariadb";

let server: OwnedMariaDbServer;
const keys = resolveAuditKeys({ databaseUrl: "mysql://", auditHmacKey: randomBytes(32).toString("base64") });
test.before(async () => {
  useAuditKeys(keys);
  server = await startOwned();
});
test.after.always(cleanupAll);

const HOSTILE = [
  "x'; DROP TABLE tenants; -- ",
  "x\\'; DROP TABLE tenants; -- ",
  'x"; DROP TABLE tenants; -- ',
  "x\\\\'); DELETE FROM audit_events; SELECT ('",
  "x`; DROP TABLE audit_events; -- ",
];

// In this order: the second one changes the server's global mode.
for (const serverMode of ["default", "NO_BACKSLASH_ESCAPES"]) {
  test.serial(
    `sql - stacked input is stored as data and runs nothing (server sql_mode ${serverMode})`,
    async (t) => {
      const dbInfo = await server.createDatabase();
      if (serverMode !== "default")
        await dbInfo.query("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')");
      const db = openDb(dbInfo.url);
      try {
        await migrate(db);
        const tenant = await createTenant(db, "stacked");
        for (const name of HOSTILE) {
          const { key_id } = await createAutomationKey(db, { tenant: tenant.tenant_id, name });
          const row = await db("automation_keys").where({ id: key_id }).first("name");
          t.is(row.name, name);
          const [echo] = await db.raw("SELECT ? AS v", [name]);
          t.is(echo[0].v, name);
          // the rate limiter's raw upsert binds its values the same way
          t.is((await countRequest(db, name.slice(0, 36), 60, 10)).count, 1);
        }
        // An operation's start and finish (fixed-text statements, db/statement.ts) bind theirs too.
        const serverId = randomUUID();
        await db("servers").insert({ id: serverId, tenant_id: tenant.tenant_id, name: "s", created_at: 1 });
        for (const value of HOSTILE) {
          const op = await createOperation(db, {
            tenantId: tenant.tenant_id,
            serverId,
            operationType: "exec",
            keyId: null,
            runId: value,
            leaseMs: 60_000,
            deadlineAt: Date.now() + 60_000,
            audit: { command: value },
          });
          const result = {
            status: "completed" as const,
            exit_code: 0,
            stdout: value,
            stderr: value,
            duration_ms: 1,
          };
          t.truthy(await finishOperation(db, op.id, result, serverId, tenant.tenant_id));
          const row = await db("operations").where({ id: op.id }).first("run_id", "stdout", "status");
          t.deepEqual(row, { run_id: value, stdout: value, status: "completed" });
        }
        const tables = (await dbInfo.tables()).sort();
        t.true(tables.includes("tenants") && tables.includes("audit_events"), tables.join(","));
        const events = await db("audit_events")
          .where({ tenant_id: tenant.tenant_id })
          .count({ n: "*" })
          .first();
        t.is(Number(events?.n), HOSTILE.length * 3); // key created, operation started, finished
        t.true((await verifyTenantChain(db, tenant.tenant_id, keys!)).ok);
      } finally {
        await db.destroy();
      }
    },
  );
}

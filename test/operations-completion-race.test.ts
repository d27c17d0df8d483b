// A completion stored twice at once (operations/service.ts completeReported): the api that
// waits for the result commits it on its own chain head while its gateway, which gave up on
// the api's answer, commits the same result on the head the job's hint told it. On a real
// MariaDB with two "processes" (two pools, each with its own group committer), both taking
// the one-round-trip way on the row's known facts: for every operation exactly one of them
// moves the row, exactly one operation.completed event is appended, the stored result is the
// winner's, and the chain verifies.
import { randomBytes, randomUUID } from "node:crypto";
import test from "ava";
import { resolveAuditKeys, useAuditKeys } from "../control-plane/src/audit/chain-key";
import { chainHeadGuess, noteChainHead } from "../control-plane/src/audit/group-commit";
import { verifyTenantChain } from "../control-plane/src/audit/verify";
import { createTenant } from "../control-plane/src/cli/admin";
import { migrate, openDb } from "../control-plane/src/db/knex";
import { createOperation, finishOperation } from "../control-plane/src/operations/store";
import { cleanupAll } from "./harness/cleanup";
import { type OwnedMariaDbServer, startOwned } from "./harness/mariadb";

let server: OwnedMariaDbServer;
const keys = resolveAuditKeys({ databaseUrl: "mysql://", auditHmacKey: randomBytes(32).toString("base64") })!;
test.before(async () => {
  useAuditKeys(keys);
  server = await startOwned();
});
test.after.always(cleanupAll);

const result = (by: string) => ({
  status: "completed" as const,
  exit_code: 0,
  stdout: by,
  stderr: "",
  duration_ms: 3,
});

test("operations completion race - the waiting api and its gateway store one result at once: one wins, one completion event, the chain verifies", async (t) => {
  const url = (await server.createDatabase()).url;
  const api = openDb(url);
  const gateway = openDb(url);
  t.teardown(() => Promise.all([api.destroy(), gateway.destroy()]));
  await migrate(api);
  const { tenant_id: tenantId } = await createTenant(api, `t-${randomUUID().slice(0, 8)}`);
  const serverId = randomUUID();
  await api("servers").insert({ id: serverId, tenant_id: tenantId, name: "s1", created_at: Date.now() });

  const ops = 40;
  const winners = new Map<string, string>();
  for (let i = 0; i < ops; i++) {
    const runId = i % 3 ? null : `run-${i}`;
    const { id, startedAt } = await createOperation(api, {
      tenantId,
      serverId,
      operationType: "exec",
      keyId: null,
      runId,
      leaseMs: 60_000,
      deadlineAt: Date.now() + 60_000,
      audit: { command: "true" },
    });
    const known = { operationType: "exec", startedAt, runId };
    // The gateway's guess is what the job's hint carried: the head the api's start left.
    const told = chainHeadGuess(api, tenantId);
    t.truthy(told, "the api's start left its head as a guess (the one-round-trip way is taken)");
    noteChainHead(gateway, tenantId, told!);
    const [byApi, byGateway] = await Promise.all([
      finishOperation(api, id, result("api"), serverId, tenantId, undefined, known),
      finishOperation(gateway, id, result("gateway"), serverId, tenantId, undefined, known),
    ]);
    t.is([byApi, byGateway].filter((f) => f !== null).length, 1, `exactly one store of ${id} moved it`);
    winners.set(id, byApi ? "api" : "gateway");
  }

  const completed = await api("audit_events")
    .where({ tenant_id: tenantId, event_type: "operation.completed" })
    .select("operation_id");
  t.is(completed.length, ops, "one completion event per operation");
  t.is(new Set(completed.map((e) => e.operation_id)).size, ops, "no operation has two");
  const rows = await api("operations").where({ tenant_id: tenantId }).select("id", "status", "stdout");
  for (const r of rows) {
    t.is(r.status, "completed");
    t.is(r.stdout, winners.get(r.id), "the stored result is the winner's (its hash is the event's)");
  }
  // Both ways were exercised: the race is real, not always won by one side.
  t.log(`won by the api: ${[...winners.values()].filter((w) => w === "api").length} of ${ops}`);
  const report = await verifyTenantChain(api, tenantId, keys);
  t.true(report.ok, JSON.stringify(report));
});

// `relayctl-server admin audit verify` walks the hash chain and finds the first
// link broken behind the service's back.
import { execFile } from "node:child_process";
import test from "ava";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec } from "./harness/http";
import { cleanEnv } from "./harness/process";
import { SERVER_MAIN } from "./harness/programs";

test.after.always(cleanupAll);

interface Verify {
  code: number;
  report: {
    ok: boolean;
    tenants: { tenant_id: string; ok: boolean; seq?: number; problem?: string; events?: number }[];
  };
}

function verify(c: Cluster): Promise<Verify> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [SERVER_MAIN, "admin", "audit", "verify", "--tenant", c.tenantId],
      { env: cleanEnv({ RELAYCTL_DATABASE_URL: c.db.url }), timeout: 30_000 },
      (err, stdout) => {
        const code = err ? Number((err as { code?: number }).code ?? 1) : 0;
        try {
          resolve({ code, report: JSON.parse(stdout) });
        } catch {
          reject(new Error(`audit verify printed no JSON (exit ${code}): ${stdout} ${String(err)}`));
        }
      },
    );
  });
}

test.serial("audit verify - an untouched chain verifies; an edited event is found by its seq", async (t) => {
  const c = await startCluster();
  for (const i of [1, 2, 3])
    await exec(c, { server_id: c.serverId, command: `echo ${i}`, timeout_seconds: 30 });

  const clean = await verify(c);
  t.is(clean.code, 0);
  t.true(clean.report.ok);
  t.true((clean.report.tenants[0]?.events ?? 0) >= 5, "key creation, enrollment and three execs");

  const [victim] = await c.db.query(
    "SELECT seq FROM audit_events WHERE tenant_id = ? AND event_type = 'operation.exec' ORDER BY seq LIMIT 1",
    [c.tenantId],
  );
  await c.db.query(
    "UPDATE audit_events SET payload = REPLACE(payload, 'echo 1', 'echo 9') WHERE tenant_id = ? AND seq = ?",
    [c.tenantId, victim!.seq],
  );
  const edited = await verify(c);
  t.is(edited.code, 1);
  t.false(edited.report.ok);
  t.is(edited.report.tenants[0]?.seq, Number(victim!.seq));
  t.regex(String(edited.report.tenants[0]?.problem), /edited/);
});

test.serial("audit verify - a removed last event is found through the chain head", async (t) => {
  const c = await startCluster();
  await exec(c, { server_id: c.serverId, command: "echo last", timeout_seconds: 30 });
  const [last] = await c.db.query("SELECT MAX(seq) AS seq FROM audit_events WHERE tenant_id = ?", [
    c.tenantId,
  ]);
  await c.db.query("DELETE FROM audit_events WHERE tenant_id = ? AND seq = ?", [c.tenantId, last!.seq]);
  const res = await verify(c);
  t.is(res.code, 1);
  t.regex(String(res.report.tenants[0]?.problem), /removed from the end/);
});

// The dashboard's API on the SQLite store of `make dev` (one process, in-process
// bus): the SQL that differs by dialect (grouped runs, grants, the audit walk
// without a snapshot transaction, session rate counters) and the live state
// through the memory bus.
import { join } from "node:path";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { describe } from "./harness/assertions";
import { exec } from "./harness/http";
import { createOwner, deviceTokens } from "./harness/people";
import { signInDash } from "./harness/dashboard-session";
import { pollUntil } from "./harness/wait";

test.after.always(cleanupAll);

test("sqlite - the dashboard's endpoints work on SQLite", async (t) => {
  const dir = makeTempDir("dash-sqlite");
  const databaseUrl = `sqlite://${join(dir, "dev.db")}`;
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl,
    dir,
  });
  t.teardown(() => server.stop());
  const tenant = String((await server.admin(["create-tenant", "--name", "dev"])).tenant_id);
  const key = String((await server.admin(["create-automation-key", "--tenant", tenant, "--name", "ci"])).key);
  const dash = await signInDash(server.apiUrl, await createOwner(databaseUrl, "dev"));

  const jt = await dash.call("POST", "/api/servers/join-tokens", { name: "local" });
  t.is(jt.status, 201, describe(jt));
  const stateDir = join(dir, "agent");
  const { server_id } = await enroll(server.apiUrl, String(jt.json.token), stateDir);
  await new Agent(stateDir, dir).start();
  await pollUntil(
    async () =>
      ((await dash.call("GET", "/api/servers")).json.servers as { id: string; connected: boolean }[]).find(
        (s) => s.id === server_id && s.connected,
      ),
    { what: "the server to read connected", timeoutMs: 20_000, intervalMs: 100 },
  );

  const target = { baseUrl: server.apiUrl, key };
  for (const command of ["echo a", "exit 2"])
    t.is(
      (await exec(target, { server_id, command, run_id: "r1", run_context: { provider: "github" } })).status,
      200,
    );
  const runs = await dash.call("GET", "/api/runs");
  t.is(runs.status, 200, describe(runs));
  t.like((runs.json.runs as unknown[])[0], {
    run_id: "r1",
    operations: 2,
    run_context: { provider: "github" },
    statuses: { completed: 2, failed: 0 },
  });
  const ops = await dash.call("GET", "/api/operations?run_id=r1&limit=1");
  t.is(ops.status, 200, describe(ops));
  t.like((ops.json.operations as unknown[])[0], { command: "exit 2", result: { exit_code: 2 } });
  t.truthy(ops.json.next_cursor);
  t.like((await dash.call("GET", "/api/audit/verify")).json, { ok: true });

  const made = await dash.call("POST", "/api/api-keys", { name: "k" });
  t.is(made.status, 201, describe(made));
  t.deepEqual(
    ((await dash.call("GET", "/api/api-keys")).json.api_keys as { id: string }[]).map((k) => k.id),
    [made.json.id],
  );
  t.is((await dash.call("DELETE", `/api/api-keys/${made.json.id}`)).status, 204);

  await deviceTokens(server.apiUrl, dash.browser);
  const grants = (await dash.call("GET", "/api/me/grants")).json.grants as { id: string }[];
  t.is(grants.length, 1);
  t.is((await dash.call("DELETE", `/api/me/grants/${grants[0]!.id}`)).status, 204);
  const sessions = (await dash.call("GET", "/api/me/sessions")).json.sessions as { current: boolean }[];
  t.deepEqual(
    sessions.map((s) => s.current),
    [true],
  );
});

// The key model on the SQLite store of `make dev`: API keys, automation-key management and the
// rate-limit counters (INSERT ... ON CONFLICT DO UPDATE ... RETURNING instead of MySQL's upsert).
import { join } from "node:path";
import test from "ava";
import { waitForMinuteRoom } from "./harness/wait";
import { assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { api, request } from "./harness/http";

test.after.always(cleanupAll);

test("sqlite - API key, automation-key management and rate limit work on SQLite", async (t) => {
  const dir = makeTempDir("keys-sqlite");
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl: `sqlite://${join(dir, "dev.db")}`,
    dir,
  });
  t.teardown(() => server.stop());
  await server.admin(["create-tenant", "--name", "dev"]);
  const apiKey = String((await server.admin(["create-api-key", "--tenant", "dev", "--name", "dev"])).key);
  const created = await request({ baseUrl: server.apiUrl }, "/api/automation-keys", {
    headers: { "x-api-key": apiKey },
    body: { name: "limited", rate_limit: 2, ip_allowlist: ["127.0.0.1", "::1"] },
  });
  t.is(created.status, 201, describe(created));
  const target = { baseUrl: server.apiUrl, key: String(created.json.key) };
  const path = "/operations/00000000-0000-4000-8000-000000000000";
  await waitForMinuteRoom(10_000);
  const answers = await Promise.all([1, 2, 3, 4].map(() => api(target, path)));
  t.deepEqual(answers.map((r) => r.status).sort(), [404, 404, 429, 429]);
  const limited = answers.find((r) => r.status === 429)!;
  assertDetailOnly(t, limited, 429);
  t.truthy(limited.headers.get("retry-after"));
  const audit = await request({ baseUrl: server.apiUrl }, "/api/audit", { headers: { "x-api-key": apiKey } });
  const types = (audit.json.events as { event_type: string }[]).map((e) => e.event_type);
  t.is(types.filter((e) => e === "rate_limit.hit").length, 1, types.join(","));
});

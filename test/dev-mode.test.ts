// The path `make dev` takes: one process (role all), in-process bus, SQLite, one local agent.
import { join } from "node:path";
import test from "ava";
import { Agent, enroll } from "./harness/agent";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll, makeTempDir } from "./harness/cleanup";
import { startControlPlane } from "./harness/control-plane";
import { exec } from "./harness/http";

test.after.always(cleanupAll);

test("dev mode - memory bus and SQLite run an exec end to end", async (t) => {
  const dir = makeTempDir("dev");
  const databaseUrl = `sqlite://${join(dir, "dev.db")}`;
  t.true(databaseUrl.startsWith("sqlite:///"));
  const server = await startControlPlane({
    role: "all",
    bus: "memory",
    databaseUrl,
    dir,
  });
  t.teardown(() => server.stop());
  t.regex(server.apiUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.regex(server.gatewayUrl, /^grpc:\/\/127\.0\.0\.1:\d+$/);

  const tenant = await server.admin(["create-tenant", "--name", "dev"]);
  const key = await server.admin([
    "create-automation-key",
    "--tenant",
    String(tenant.tenant_id),
    "--name",
    "dev",
  ]);
  const token = await server.admin(["create-join-token", "--tenant", "dev", "--server-name", "local"]);
  const stateDir = join(dir, "agent");
  const enrolled = await enroll(server.apiUrl, String(token.join_token), stateDir);
  t.is(enrolled.server_name, "local");
  const agent = await new Agent(stateDir, dir).start();
  t.teardown(() => agent.stop());

  const res = await exec(
    { baseUrl: server.apiUrl, key: String(key.key) },
    { server_id: enrolled.server_id, command: "echo hi", timeout_seconds: 30 },
  );
  assertCompleted(t, res, { exit_code: 0, stdout: "hi\n", stderr: "" });
});

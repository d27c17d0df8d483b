// POST /restart through api → NATS → gateway → gRPC → agent → container engine CLI.
// No engine can run containers here, so the engine is a fake `docker` (and
// `podman`) executable first on the agent's PATH: it records the argv it was
// given and exits 0, or 1 for names starting with "missing". Everything else is real.
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "ava";
import { Agent } from "./harness/agent";
import { UUID, assertCompleted, assertDetailOnly, describe } from "./harness/assertions";
import { cleanupAll, makeTempDir, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, api, getOperation, request } from "./harness/http";

const bin = makeTempDir("fake-engine");

/** A fake engine CLI: argv NUL-separated into <bin>/<name>.argv, one file per call. */
function fakeEngine(name: string): string {
  const argvFile = join(bin, `${name}.argv`);
  writeFileSync(
    join(bin, name),
    `#!/bin/sh
printf '%s\\0' "$@" > '${argvFile}'
case "$2" in
  missing*) echo "Error response from daemon: No such container: $2" >&2; exit 1 ;;
esac
echo "$2"
`,
  );
  chmodSync(join(bin, name), 0o755);
  return argvFile;
}

const dockerArgv = fakeEngine("docker");
const podmanArgv = fakeEngine("podman");

function takeArgv(file: string): string[] | undefined {
  if (!existsSync(file)) return undefined;
  const argv = readFileSync(file, "utf8").split("\0").slice(0, -1);
  rmSync(file);
  return argv;
}

let c: Cluster;

test.before(async () => {
  c = await startCluster({ agentEnv: { PATH: `${bin}:${process.env.PATH}` } });
});
test.after.always(cleanupAll);

const restart = (body: Record<string, unknown>): Promise<ApiResponse> => api(c, "/restart", { body });

test.serial(
  "restart - runs `docker restart <name>` with the name as one argv entry and answers 200",
  async (t) => {
    const res = await restart({
      server_id: c.serverId,
      container_name: "web_1.blue-green",
      run_id: "r-restart",
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "web_1.blue-green\n", stderr: "" });
    t.deepEqual(takeArgv(dockerArgv), ["restart", "web_1.blue-green"]);
    const op = await getOperation(c, String(res.json.operation_id));
    t.is(op.json.operation_type, "restart", describe(op));
    t.is(op.json.run_id, "r-restart", describe(op));
    t.is(op.json.status, "completed", describe(op));
  },
);

test.serial("restart - an engine failure is completed with its exit code and stderr", async (t) => {
  const res = await restart({ server_id: c.serverId, container_name: "missing-one" });
  assertCompleted(t, res, {
    exit_code: 1,
    stdout: "",
    stderr: "Error response from daemon: No such container: missing-one\n",
  });
  t.deepEqual(takeArgv(dockerArgv), ["restart", "missing-one"]);
});

test.serial("restart - names outside docker's rule are 422 and nothing runs", async (t) => {
  const bad = ["", "-rm", "a;id", "$(id)", "a b", "web/1", "_web", "ä", "x".repeat(256), "a\nb"];
  for (const name of bad) {
    const res = await restart({ server_id: c.serverId, container_name: name });
    const detail = assertDetailOnly(t, res, 422);
    t.regex(detail, /container_name/, `${JSON.stringify(name)}: ${detail}`);
  }
  const ok = await restart({ server_id: c.serverId, container_name: "x".repeat(255) });
  t.is(ok.status, 200, describe(ok));
  t.deepEqual(takeArgv(dockerArgv), ["restart", "x".repeat(255)]);
  const rows = await c.db.query(
    "SELECT COUNT(*) AS n FROM operations WHERE operation_type = 'restart' AND server_id = ?",
    [c.serverId],
  );
  t.is(Number(rows[0]?.n), 3, "only the valid restarts were recorded");
});

test.serial(
  "restart - a server whose agent is not connected is 409 with the operation recorded failed",
  async (t) => {
    const idle = await c.addServer({ start: false });
    const res = await restart({ server_id: idle.serverId, container_name: "web" });
    t.is(res.status, 409, describe(res));
    t.is(res.json.detail, `server '${idle.serverName}' is not connected`, describe(res));
    t.regex(String(res.json.operation_id), UUID, describe(res));
    const op = await getOperation(c, String(res.json.operation_id));
    t.is(op.json.status, "failed", describe(op));
    t.is(takeArgv(dockerArgv), undefined, "no engine ran");
  },
);

test.serial("restart - unknown server is 404, missing fields 422", async (t) => {
  const unknown = await restart({ server_id: "00000000-0000-4000-8000-000000000000", container_name: "web" });
  assertDetailOnly(t, unknown, 404);
  assertDetailOnly(t, await restart({ server_id: c.serverId }), 422);
  assertDetailOnly(t, await restart({ server_id: c.serverId, container_name: "web", extra: 1 }), 422);
});

test.serial("restart - an agent set to podman runs `podman restart <name>`", async (t) => {
  const server = await c.addServer({ start: false });
  const agent = new Agent(server.stateDir, c.dir, {
    PATH: `${bin}:${process.env.PATH}`,
    RELAYCTL_AGENT_CONTAINER_ENGINE: "podman",
  });
  onCleanup(() => agent.stop());
  await agent.start();
  const res = await restart({ server_id: server.serverId, container_name: "db" });
  assertCompleted(t, res, { exit_code: 0, stdout: "db\n", stderr: "" });
  t.deepEqual(takeArgv(podmanArgv), ["restart", "db"]);
  t.is(takeArgv(dockerArgv), undefined, "docker was not used");
});

test.serial("restart - a key without the restart operation in scope is 403", async (t) => {
  const apiKey = String((await c.admin(["create-api-key", "--tenant", c.tenantId, "--name", "ops"])).key);
  const created = await request(c, "/api/automation-keys", {
    body: { name: "exec-only", operations: ["exec"] },
    key: null,
    headers: { "x-api-key": apiKey },
  });
  t.is(created.status, 201, describe(created));
  const key = String(created.json.key);
  const res = await api(c, "/restart", { body: { server_id: c.serverId, container_name: "web" }, key });
  assertDetailOnly(t, res, 403);
});

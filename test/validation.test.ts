// POST /exec request validation: each rule at its bound (accepted) and one past it (422 whose
// detail names the field). Limits from the contract: command 8,192 characters; env 200 keys and
// 64 KB (65,536 bytes of keys + values); timeout_seconds an integer 1..900.
import test, { type ExecutionContext } from "ava";
import { assertCompleted, assertDetailOnly } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { type ApiResponse, exec } from "./harness/http";

// Tests here run one after another on one shared cluster, so each one checks its own behaviour;
// concurrent requests have their own tests (exec - ... at once / concurrent).
let c: Cluster;

test.before(async () => {
  c = await startCluster();
});
test.after.always(cleanupAll);

function assert422(t: ExecutionContext, res: ApiResponse, field: string): void {
  const detail = assertDetailOnly(t, res, 422);
  t.true(detail.includes(field), `detail should name ${field}: ${detail}`);
}

/** `echo ok` padded with a shell comment to exactly n characters. */
function commandOfLength(n: number): string {
  const head = "echo ok #";
  return head + "x".repeat(n - head.length);
}

/** count keys whose keys + values total exactly `bytes` (ASCII, so bytes = characters). */
function envOf(count: number, bytes?: number): Record<string, string> {
  const env: Record<string, string> = {};
  for (let i = 0; i < count; i++) env[`K${String(i).padStart(3, "0")}`] = `value-${i}-`;
  if (bytes !== undefined) {
    const used = Object.entries(env).reduce((n, [k, v]) => n + k.length + v.length, 0);
    const last = `K${String(count - 1).padStart(3, "0")}`;
    env[last] = `${env[last]}${"p".repeat(bytes - used)}`;
  }
  return env;
}

function envBytes(env: Record<string, string>): number {
  return Object.entries(env).reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v), 0);
}

test.serial("validation - command of 8,192 characters is accepted", async (t) => {
  const command = commandOfLength(8192);
  t.is(command.length, 8192);
  assertCompleted(t, await exec(c, { server_id: c.serverId, command, timeout_seconds: 30 }), {
    exit_code: 0,
    stdout: "ok\n",
  });
});

test.serial("validation - command of 8,193 characters is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId, command: commandOfLength(8193) }), "command");
});

test.serial("validation - missing command is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId }), "command");
});

test.serial("validation - command that is not a string is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId, command: ["echo", "x"] }), "command");
});

test.serial("validation - env with 200 keys is accepted and every key reaches the command", async (t) => {
  const env = envOf(200);
  const res = await exec(c, {
    server_id: c.serverId,
    command: "env | grep -c '^K[0-9][0-9][0-9]=value-'",
    env,
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "200\n" });
});

test.serial("validation - env with 201 keys is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId, command: "true", env: envOf(201) }), "env");
});

test.serial(
  "validation - env of exactly 65,536 bytes is accepted and reaches the command whole",
  async (t) => {
    const env = envOf(3, 65536);
    t.is(envBytes(env), 65536);
    const res = await exec(c, {
      server_id: c.serverId,
      command: 'echo "${#K000} ${#K001} ${#K002}"',
      env,
      timeout_seconds: 30,
    });
    assertCompleted(t, res, {
      exit_code: 0,
      stdout: `${env.K000.length} ${env.K001.length} ${env.K002.length}\n`,
    });
  },
);

test.serial("validation - env of 65,537 bytes is 422", async (t) => {
  const env = envOf(3, 65537);
  t.is(envBytes(env), 65537);
  assert422(t, await exec(c, { server_id: c.serverId, command: "true", env }), "env");
});

test.serial("validation - env value that is not a string is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId, command: "true", env: { PORT: 8080 } }), "env");
});

test.serial("validation - env that is not an object is 422", async (t) => {
  assert422(t, await exec(c, { server_id: c.serverId, command: "true", env: ["A=1"] }), "env");
});

for (const timeout of [1, 900]) {
  test.serial(`validation - timeout_seconds ${timeout} is accepted`, async (t) => {
    const res = await exec(c, { server_id: c.serverId, command: "echo in-time", timeout_seconds: timeout });
    assertCompleted(t, res, { exit_code: 0, stdout: "in-time\n" });
  });
}

for (const timeout of [0, 901, -1, 1.5, "10", null]) {
  test.serial(`validation - timeout_seconds ${JSON.stringify(timeout)} is 422`, async (t) => {
    const res = await exec(c, { server_id: c.serverId, command: "true", timeout_seconds: timeout });
    assert422(t, res, "timeout_seconds");
  });
}

for (const serverId of ["not-a-uuid", "1234", 42]) {
  test.serial(`validation - server_id ${JSON.stringify(serverId)} is 422`, async (t) => {
    assert422(t, await exec(c, { server_id: serverId, command: "true" }), "server_id");
  });
}

test.serial("validation - missing server_id is 422", async (t) => {
  assert422(t, await exec(c, { command: "true" }), "server_id");
});

test.serial("validation - run_context with every named string field is accepted", async (t) => {
  const run_context = {
    provider: "github",
    repository: "acme/shop",
    workflow: "deploy.yml",
    trigger: "push",
    actor: "octocat",
    sha: "0123456789abcdef0123456789abcdef01234567",
    ref: "refs/heads/main",
  };
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo with-context",
    run_id: "run-ctx-1",
    run_context,
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "with-context\n" });
});

test.serial("validation - working_directory that is not a string is 422", async (t) => {
  assert422(
    t,
    await exec(c, { server_id: c.serverId, command: "true", working_directory: 7 }),
    "working_directory",
  );
});

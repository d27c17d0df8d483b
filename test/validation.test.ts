// POST /exec request validation on a real installation: each limit at its bound is accepted and
// reaches the command on the agent whole. Limits from the contract: command 8,192 characters;
// env 200 keys and 64 KB (65,536 bytes of keys + values); timeout_seconds an integer 1..900.
// One past each bound (422 whose detail names the field) needs no cluster: those run through
// Fastify's inject() in control-plane/src/api/app.test.ts, where they take milliseconds.
import test from "ava";
import { assertCompleted } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec } from "./harness/http";

// Tests here run one after another on one shared cluster, so each one checks its own behaviour;
// concurrent requests have their own tests (exec - ... at once / concurrent).
let c: Cluster;

test.before(async () => {
  c = await startCluster();
});
test.after.always(cleanupAll);

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

for (const timeout of [1, 900]) {
  test.serial(`validation - timeout_seconds ${timeout} is accepted`, async (t) => {
    const res = await exec(c, { server_id: c.serverId, command: "echo in-time", timeout_seconds: timeout });
    assertCompleted(t, res, { exit_code: 0, stdout: "in-time\n" });
  });
}

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

// POST /exec and GET /operations/{id} through api → NATS → gateway → gRPC → agent pty.
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { ISO_UTC, UUID, assertCompleted, describe } from "./harness/assertions";
import { cleanupAll, onCleanup } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, getOperation, waitForOperationEnd } from "./harness/http";

// Tests here run one after another on one shared cluster, so each one checks its own behaviour;
// concurrent requests have their own tests (exec - ... at once / concurrent).
let c: Cluster;

test.before(async () => {
  c = await startCluster();
});
test.after.always(cleanupAll);

test.serial("exec - a command that finishes in time answers 200 completed with its output", async (t) => {
  const res = await exec(c, { server_id: c.serverId, command: "echo hello-relayctl", timeout_seconds: 30 });
  assertCompleted(t, res, { exit_code: 0, stdout: "hello-relayctl\n", stderr: "" });
  t.deepEqual(
    Object.keys(res.json).sort(),
    ["duration_ms", "exit_code", "operation_id", "status", "stderr", "stdout"],
    describe(res),
  );
});

test.serial("exec - a non-zero exit is still completed with that exit_code", async (t) => {
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo before-exit; exit 3",
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 3, stdout: "before-exit\n", stderr: "" });
});

test.serial("exec - stdout and stderr stay separate", async (t) => {
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo to-out; echo to-err >&2; echo more-out; echo more-err 1>&2",
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "to-out\nmore-out\n", stderr: "to-err\nmore-err\n" });
});

test.serial("exec - env values are injected into the command's environment", async (t) => {
  // The agent scrubs env values from output, so the command reports facts about them, not them.
  const res = await exec(c, {
    server_id: c.serverId,
    command: 'test "$GREETING" = "hello-env-value" && echo "len=${#GREETING} other=${#OTHER_VAR}"',
    env: { GREETING: "hello-env-value", OTHER_VAR: "0123456789" },
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: "len=15 other=10\n", stderr: "" });
});

test.serial("exec - working_directory is the command's current directory", async (t) => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "relayctl-test-wd-")));
  onCleanup(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const res = await exec(c, {
    server_id: c.serverId,
    command: "pwd",
    working_directory: dir,
    timeout_seconds: 30,
  });
  assertCompleted(t, res, { exit_code: 0, stdout: `${dir}\n`, stderr: "" });
});

test.serial("exec - a command the agent cannot start says why in stderr, answered and stored", async (t) => {
  const missing = join(tmpdir(), `relayctl-test-missing-${Date.now()}`);
  const res = await exec(c, {
    server_id: c.serverId,
    command: "echo never",
    working_directory: missing,
    timeout_seconds: 30,
  });
  t.is(res.status, 200, describe(res));
  t.is(res.json.status, "failed", describe(res));
  t.is(res.json.stdout, "");
  t.regex(String(res.json.stderr), new RegExp(`working directory does not exist: ${missing}`), describe(res));
  // The stored operation, as a later poll reads it, says the same.
  const again = await getOperation(c, String(res.json.operation_id));
  t.is((again.json.result as { stderr: string }).stderr, String(res.json.stderr), describe(again));
});

test.serial(
  "exec - a command slower than timeout_seconds answers 202 running, then the operation completes",
  async (t) => {
    const runId = `run-${Date.now()}`;
    // The command cannot end before the test opens the gate, after the answer: so the answer
    // did not wait for the command, however slow this machine is (a window such as "under
    // 2.9 s" failed when the machine was busy).
    const gate = join(c.dir, `gate-${runId}`);
    const res = await exec(c, {
      server_id: c.serverId,
      command: `sleep 3; while [ ! -e ${gate} ]; do sleep 0.05; done; echo late-out; echo late-err >&2; exit 4`,
      timeout_seconds: 1,
      run_id: runId,
    });
    t.is(res.status, 202, describe(res));
    t.deepEqual(Object.keys(res.json).sort(), ["operation_id", "status"], describe(res));
    t.is(res.json.status, "running");
    t.regex(String(res.json.operation_id), UUID);
    // It waited timeout_seconds; the upper bound only catches a wait far past it.
    t.true(res.elapsedMs >= 900 && res.elapsedMs < 8000, `answered after ${res.elapsedMs} ms`);

    const id = String(res.json.operation_id);
    const running = await getOperation(c, id);
    t.is(running.status, 200, describe(running));
    t.is(running.json.status, "running", describe(running));
    writeFileSync(gate, "");

    const done = await waitForOperationEnd(c, id, 20_000);
    const op = done.json;
    t.is(op.operation_id, id);
    t.is(op.operation_type, "exec");
    t.is(op.server_id, c.serverId);
    t.is(op.server_name, c.serverName);
    t.is(op.status, "completed", describe(done));
    t.is(op.run_id, runId);
    const result = op.result as Record<string, unknown>;
    t.deepEqual(
      Object.keys(result ?? {}).sort(),
      ["duration_ms", "exit_code", "stderr", "stdout"],
      describe(done),
    );
    t.is(result.exit_code, 4);
    t.is(result.stdout, "late-out\n");
    t.is(result.stderr, "late-err\n");
    t.true(Number.isInteger(result.duration_ms) && Number(result.duration_ms) >= 2900, describe(done));
    t.regex(String(op.started_at), ISO_UTC);
    t.regex(String(op.completed_at), ISO_UTC);
    const started = Date.parse(String(op.started_at));
    const completed = Date.parse(String(op.completed_at));
    t.true(completed - started >= 2900, `started ${op.started_at}, completed ${op.completed_at}`);
  },
);

test.serial(
  "exec - GET /operations returns a synchronously completed operation with every field",
  async (t) => {
    const res = await exec(c, {
      server_id: c.serverId,
      command: "echo fields",
      timeout_seconds: 30,
      run_id: "r-fields",
    });
    assertCompleted(t, res, { exit_code: 0, stdout: "fields\n" });
    const op = await getOperation(c, String(res.json.operation_id));
    t.is(op.status, 200, describe(op));
    t.like(op.json, {
      operation_id: res.json.operation_id,
      operation_type: "exec",
      server_id: c.serverId,
      server_name: c.serverName,
      status: "completed",
      run_id: "r-fields",
      result: { exit_code: 0, stdout: "fields\n", stderr: "", duration_ms: res.json.duration_ms },
    });
    t.regex(String(op.json.started_at), ISO_UTC);
    t.regex(String(op.json.completed_at), ISO_UTC);
  },
);

test.serial("exec - the same exec twice runs twice as two operations", async (t) => {
  const body = {
    server_id: c.serverId,
    command: "echo same-command",
    timeout_seconds: 30,
    run_id: "same-run",
  };
  const first = await exec(c, body);
  const second = await exec(c, body);
  assertCompleted(t, first, { exit_code: 0, stdout: "same-command\n" });
  assertCompleted(t, second, { exit_code: 0, stdout: "same-command\n" });
  t.not(first.json.operation_id, second.json.operation_id);
});

test.serial("exec - the same exec sent twice at once runs twice as two operations", async (t) => {
  const body = {
    server_id: c.serverId,
    command: "echo same-at-once",
    timeout_seconds: 30,
    run_id: "same-run",
  };
  const [first, second] = await Promise.all([exec(c, body), exec(c, body)]);
  assertCompleted(t, first!, { exit_code: 0, stdout: "same-at-once\n" });
  assertCompleted(t, second!, { exit_code: 0, stdout: "same-at-once\n" });
  t.not(first!.json.operation_id, second!.json.operation_id);
});

test.serial("exec - 20 concurrent execs all complete with their own output", async (t) => {
  const n = 20;
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) =>
      exec(c, {
        server_id: c.serverId,
        command: `echo out-${i}; echo err-${i} >&2; exit ${i % 5}`,
        timeout_seconds: 60,
      }),
    ),
  );
  answers.forEach((res, i) => {
    assertCompleted(t, res, { exit_code: i % 5, stdout: `out-${i}\n`, stderr: `err-${i}\n` });
  });
  t.is(new Set(answers.map((r) => r.json.operation_id)).size, n);
});

test.serial("exec - an unknown operation id is 404", async (t) => {
  const res = await getOperation(c, "00000000-0000-4000-8000-000000000000");
  t.is(res.status, 404, describe(res));
});

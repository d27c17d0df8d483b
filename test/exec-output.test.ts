// End to end through the API: no output is lost, and the hard deadline kills a
// whole process tree (the exec ceiling is 3 s in this cluster).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { assertCompleted, describe } from "./harness/assertions";
import { cleanupAll } from "./harness/cleanup";
import { type Cluster, startCluster } from "./harness/cluster";
import { exec, waitForOperationEnd } from "./harness/http";
import { pollUntil } from "./harness/wait";

let c: Cluster;

test.before(async () => {
  c = await startCluster({ serverEnv: { RELAYCTL_EXEC_CEILING_SECONDS: "3" } });
});
test.after.always(cleanupAll);

const SEQ_2000 = `${Array.from({ length: 2000 }, (_, i) => i + 1).join("\n")}\n`;

test.serial(
  "exec output - 2,000 lines printed right before exit arrive whole, 100 runs out of 100",
  async (t) => {
    for (let run = 0; run < 100; run++) {
      const withStderr = run % 4 === 0;
      const command = withStderr ? "seq 1 2000; seq 1 2000 >&2; exit 3" : "seq 1 2000; exit 3";
      const res = await exec(c, { server_id: c.serverId, command, timeout_seconds: 30 });
      assertCompleted(t, res, { exit_code: 3, stdout: SEQ_2000, stderr: withStderr ? SEQ_2000 : "" });
      if (res.json.stdout !== SEQ_2000) return t.fail(`run ${run}: ${describe(res)}`);
    }
  },
);

test.serial(
  "exec output - the hard deadline kills the process tree, a child ignoring SIGTERM too",
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "relayctl-deadline-"));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const pidFile = join(dir, "child.pid");
    const command = `bash -c 'trap "" TERM; echo $$ > ${pidFile}; while :; do sleep 1; done' & sleep 60`;
    const res = await exec(c, { server_id: c.serverId, command, timeout_seconds: 1 });
    t.is(res.status, 202, describe(res));
    const childPid = Number(
      await pollUntil(
        async () => {
          try {
            return readFileSync(pidFile, "utf8").trim() || undefined;
          } catch {
            return undefined;
          }
        },
        { what: "the child to write its pid", timeoutMs: 10_000, intervalMs: 50 },
      ),
    );
    const end = await waitForOperationEnd(c, String(res.json.operation_id), 20_000);
    t.is(end.json.status, "timeout", describe(end));
    const gone = await pollUntil(
      async () => {
        try {
          process.kill(childPid, 0);
          return undefined;
        } catch {
          return true;
        }
      },
      { what: `child ${childPid} to be gone`, timeoutMs: 10_000, intervalMs: 50 },
    );
    t.true(gone);
  },
);

import test from "ava";
import { JobStatus } from "@relayctl/proto";
import { runRebootCommand } from "./reboot.js";

test("reboot command - exit 0 sends no result (the machine is going down)", async (t) => {
  t.is(await runRebootCommand("true", "op-1"), undefined);
});

test("reboot command - a non-zero exit is FAILED with its exit code and stderr", async (t) => {
  const r = await runRebootCommand("echo 'Failed to reboot: Access denied' >&2; exit 3", "op-2");
  t.is(r?.status, JobStatus.JOB_STATUS_FAILED);
  t.is(r?.exitCode, 3);
  t.is(r?.stderr, "Failed to reboot: Access denied\n");
  t.is(r?.operationId, "op-2");
});

test("reboot command - a command that cannot run is FAILED with the shell's reason", async (t) => {
  const r = await runRebootCommand("/nonexistent/reboot-now", "op-3");
  t.is(r?.status, JobStatus.JOB_STATUS_FAILED);
  t.is(r?.exitCode, 127);
  t.regex(r?.stderr ?? "", /not found|No such file/);
});

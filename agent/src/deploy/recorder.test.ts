import { DeployStepStatus, type JobProgress } from "@relayctl/proto";
import test from "ava";
import { StepRecorder } from "./recorder.js";

const SECRET = "s3cret-value-42";

test("deploy recorder - logs are scrubbed of every secret form before they are kept or sent", (t) => {
  const sent: JobProgress[] = [];
  const rec = new StepRecorder("op-1", [SECRET, "git-password-9"], (p) => sent.push(p));
  rec.begin("build");
  rec.log("build", `step 1: echo ${SECRET}`);
  rec.log(
    "build",
    `auth ${Buffer.from(`u:${SECRET}`).toString("base64")} url ${encodeURIComponent(`${SECRET}/x`)}`,
  );
  rec.fail("build", "fatal: password git-password-9 rejected");
  const all = JSON.stringify(sent) + JSON.stringify(rec.steps);
  t.false(all.includes(SECRET));
  t.false(all.includes("git-password-9"));
  t.false(all.includes(Buffer.from(`u:${SECRET}`).toString("base64").slice(4, -4)));
  t.regex(rec.steps[0]!.log, /step 1: echo \*\*\*/);
  t.is(rec.scrub(`x ${SECRET} y`), "x *** y");
});

test("deploy recorder - seq counts 1, 2, 3... and each message carries its step's state", (t) => {
  const sent: JobProgress[] = [];
  const rec = new StepRecorder("op-2", [], (p) => sent.push(p));
  rec.skip("fetch", "no repository");
  rec.begin("build");
  rec.log("build", "pulling");
  rec.succeed("build", "done");
  rec.begin("start");
  t.is(rec.current, "start");
  t.deepEqual(
    sent.map((p) => [p.seq, p.operationId, p.progress?.deploy.step, p.progress?.deploy.status]),
    [
      [1, "op-2", "fetch", DeployStepStatus.DEPLOY_STEP_STATUS_SKIPPED],
      [2, "op-2", "build", DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING],
      [3, "op-2", "build", DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING],
      [4, "op-2", "build", DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED],
      [5, "op-2", "start", DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING],
    ],
  );
  t.is(rec.steps[1]!.log, "pulling\ndone\n");
  t.true(rec.steps[1]!.endedAtUnixMs >= rec.steps[1]!.startedAtUnixMs);
});

test("deploy recorder - a step's log is capped, then marked truncated once", (t) => {
  const sent: JobProgress[] = [];
  const rec = new StepRecorder("op-3", [], (p) => sent.push(p), 100);
  rec.begin("build");
  rec.log("build", "x".repeat(80));
  rec.log("build", "y".repeat(80));
  rec.log("build", "z".repeat(80));
  const log = rec.steps[0]!.log;
  t.true(log.endsWith("[log truncated]\n"));
  t.is(log.split("[log truncated]").length, 2);
  t.false(log.includes("z"));
  t.is(Buffer.byteLength(log.replace("\n[log truncated]\n", "")), 100);
});

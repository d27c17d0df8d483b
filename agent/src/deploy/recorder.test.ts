import { DeployStepStatus, type JobProgress } from "@relayctl/proto";
import test from "ava";
import { MAX_LINE_CHARS, PARTIAL_LINE_AFTER_MS, StepRecorder } from "./recorder.js";

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

const logs = (sent: JobProgress[]) => sent.map((p) => p.progress?.deploy.log);

test("deploy recorder - output cut mid-line is sent as whole lines, each stream apart", (t) => {
  const sent: JobProgress[] = [];
  const rec = new StepRecorder("op-4", [], (p) => sent.push(p));
  rec.begin("build");
  rec.stream("build", "STEP 1/5: FROM lo");
  rec.stream("build", "warning: slo", "stderr");
  rec.stream("build", "calhost/base\nSTEP 2/5: RU");
  rec.stream("build", "w disk\n", "stderr");
  rec.stream("build", "N echo\nSTEP 3/5: COPY www /www\n");
  rec.succeed("build");
  t.deepEqual(logs(sent).slice(1), [
    "STEP 1/5: FROM localhost/base\n",
    "warning: slow disk\n",
    "STEP 2/5: RUN echo\nSTEP 3/5: COPY www /www\n",
    "",
  ]);
  t.is(
    rec.steps[0]!.log,
    "STEP 1/5: FROM localhost/base\nwarning: slow disk\nSTEP 2/5: RUN echo\nSTEP 3/5: COPY www /www\n",
  );
});

test("deploy recorder - a line without its end goes out before the step's next line and at its end", (t) => {
  const sent: JobProgress[] = [];
  const rec = new StepRecorder("op-5", [], (p) => sent.push(p));
  rec.begin("build");
  rec.stream("build", "Continue? [y/N] ");
  rec.log("build", "building again");
  rec.stream("build", "last words");
  rec.fail("build", "exit 1");
  t.deepEqual(logs(sent).slice(1), ["Continue? [y/N] \n", "building again\n", "last words\n", "exit 1\n"]);
  t.is(sent.at(-1)?.progress?.deploy.status, DeployStepStatus.DEPLOY_STEP_STATUS_FAILED);
});

test("deploy recorder - a line without its end goes out after a quiet moment; a huge one in pieces", async (t) => {
  const sent: JobProgress[] = [];
  let quiet: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    quiet = resolve;
  });
  const rec = new StepRecorder("op-6", [], (p) => {
    sent.push(p);
    if (p.progress?.deploy.log === "Password: \n") quiet();
  });
  rec.begin("build");
  rec.stream("build", "x".repeat(MAX_LINE_CHARS * 2 + 5));
  t.deepEqual(logs(sent).slice(1), [`${"x".repeat(MAX_LINE_CHARS)}\n${"x".repeat(MAX_LINE_CHARS)}\n`]);
  rec.stream("build", "\nPassword: ");
  const since = Date.now();
  await released;
  t.true(Date.now() - since >= PARTIAL_LINE_AFTER_MS - 50);
  t.deepEqual(logs(sent).slice(2), ["xxxxx\n", "Password: \n"]);
});

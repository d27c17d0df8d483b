import { mkdtemp, readFile, readdir, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AgentMessage, type Job, JobStatus } from "@relayctl/proto";
import test from "ava";
import { silentLogger } from "../log.js";
import { PtyRunner } from "../runner/pty-runner.js";
import { Dispatcher } from "./dispatcher.js";

const runner = new PtyRunner({ shell: "/bin/bash", outputCapBytes: 1_048_576, killGraceMs: 300 });
test.after.always(() => runner.close());

const open = (stateDir: string) => Dispatcher.open({ stateDir, runner, log: silentLogger() });

const execJob = (operationId: string, command: string): Job => ({
  operationId,
  traceContext: {},
  requestId: "",
  kind: { $case: "exec", exec: { command, workingDirectory: "", env: {}, deadlineSeconds: 30 } },
});

function recorder(dispatcher: Dispatcher): AgentMessage["msg"][] {
  const sent: AgentMessage["msg"][] = [];
  dispatcher.attach((m) => sent.push(m.msg));
  return sent;
}

test("journal - the same operation id runs once, also across a re-created dispatcher", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const counter = join(stateDir, "runs");
  const job = execJob("11111111-1111-4111-8111-111111111111", `echo run >> ${counter}`);

  const first = await open(stateDir);
  const sent = recorder(first);
  await Promise.all([first.handleJob(job), first.handleJob(job)]); // a redelivery racing the first
  await first.idle();
  await first.close();
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobAck", "jobAck", "jobResult"],
  );

  const second = await open(stateDir);
  const sentAgain = recorder(second);
  await second.handleJob(job);
  await second.idle();
  await second.close();
  t.is(await readFile(counter, "utf8"), "run\n");
  // Not acked yet, so the duplicate gets the stored result again.
  t.deepEqual(
    sentAgain.map((m) => m?.$case),
    ["jobAck", "jobResult"],
  );
});

test("journal - a result stays on disk until ResultAck and is re-sent meanwhile", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const id = "22222222-2222-4222-8222-222222222222";
  const dispatcher = await open(stateDir);
  t.teardown(() => dispatcher.close());
  await dispatcher.handleJob(execJob(id, "echo hello; exit 4")); // not attached: the stream is down
  const path = join(stateDir, "results", `${id}.json`);
  t.is((await stat(path)).mode & 0o777, 0o600);

  const sent = recorder(dispatcher);
  await dispatcher.resendUnacked();
  const result = sent[0]?.$case === "jobResult" ? sent[0].jobResult : undefined;
  t.like(result, { operationId: id, status: JobStatus.JOB_STATUS_COMPLETED, exitCode: 4, stdout: "hello\n" });

  await dispatcher.handleResultAck(id);
  t.deepEqual(await readdir(join(stateDir, "results")), []);
});

test("journal - a job interrupted by an agent restart is reported failed, not run again", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const id = "33333333-3333-4333-8333-333333333333";
  await writeFile(join(stateDir, "journal.log"), `start ${id}\nstart 4444`); // torn last line
  const dispatcher = await open(stateDir);
  t.teardown(() => dispatcher.close());
  const sent = recorder(dispatcher);
  await dispatcher.resendUnacked();
  t.is(sent.length, 1);
  t.like(sent[0], {
    $case: "jobResult",
    jobResult: { operationId: id, status: JobStatus.JOB_STATUS_FAILED },
  });
  t.is(await readFile(join(stateDir, "journal.log"), "utf8"), `start ${id}\ndone ${id}\n`);
});

test("journal - an unsupported job kind is acked and fails", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const dispatcher = await open(stateDir);
  t.teardown(() => dispatcher.close());
  const sent = recorder(dispatcher);
  await dispatcher.handleJob({
    operationId: "55555555-5555-4555-8555-555555555555",
    kind: undefined,
    traceContext: {},
    requestId: "",
  });
  t.like(sent[1], { $case: "jobResult", jobResult: { status: JobStatus.JOB_STATUS_FAILED } });
});

test("reboot - acked, no result, done in the journal first: no rerun and no 'outcome unknown' after restart", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const counter = join(stateDir, "reboots");
  const job: Job = {
    operationId: "77777777-7777-4777-8777-777777777777",
    traceContext: {},
    requestId: "",
    kind: { $case: "reboot", reboot: { reason: "api" } },
  };
  const first = await Dispatcher.open({
    stateDir,
    runner,
    log: silentLogger(),
    rebootCommand: `echo x >> ${counter}`,
  });
  const sent = recorder(first);
  await first.handleJob(job);
  await first.idle();
  await first.close();
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobAck"],
  );
  const second = await Dispatcher.open({
    stateDir,
    runner,
    log: silentLogger(),
    rebootCommand: `echo x >> ${counter}`,
  });
  const sentAgain = recorder(second);
  await second.resendUnacked();
  await second.handleJob(job); // a redelivery after the reboot
  await second.idle();
  await second.close();
  t.is(await readFile(counter, "utf8"), "x\n");
  t.deepEqual(
    sentAgain.map((m) => m?.$case),
    ["jobAck"],
  );
});

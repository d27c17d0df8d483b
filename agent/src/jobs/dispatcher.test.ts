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

// Acked at once, as before the result-as-ack: these tests read the exact messages sent.
const open = (stateDir: string, ackAfterMs = 0) =>
  Dispatcher.open({ stateDir, runner, log: silentLogger(), ackAfterMs });

const execJob = (operationId: string, command: string): Job => ({
  operationId,
  traceContext: {},
  requestId: "",
  kind: {
    $case: "exec",
    exec: { command, workingDirectory: "", env: {}, deadlineSeconds: 30, streamOutput: false },
  },
});

async function pollUntil(check: () => Promise<boolean>, o: { what: string; timeoutMs: number }) {
  const deadline = Date.now() + o.timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${o.what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

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
    ackAfterMs: 60_000, // a reboot is acked at once whatever the setting
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

test("ack - a job that finishes within ackAfterMs is acked by its result alone", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const dispatcher = await open(stateDir, 60_000);
  t.teardown(() => dispatcher.close());
  const sent = recorder(dispatcher);
  const id = "88888888-8888-4888-8888-888888888888";
  await dispatcher.handleJob(execJob(id, "echo quick"));
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobResult"],
  );
  // A redelivery (the gateway never saw the result) is acked at once, and gets the result again.
  await dispatcher.handleJob(execJob(id, "echo quick"));
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobResult", "jobAck", "jobResult"],
  );
  t.like(sent[2], { $case: "jobResult", jobResult: { operationId: id, stdout: "quick\n" } });
});

test("ack - a job still running after ackAfterMs is acked while it runs, then its result follows", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const dispatcher = await open(stateDir, 20);
  t.teardown(() => dispatcher.close());
  const sent = recorder(dispatcher);
  const go = join(stateDir, "go");
  const id = "99999999-9999-4999-8999-999999999999";
  const running = dispatcher.handleJob(execJob(id, `while [ ! -e ${go} ]; do sleep 0.01; done; echo slow`));
  await pollUntil(async () => sent.length > 0, { what: "the ack of the running job", timeoutMs: 10_000 });
  t.deepEqual(sent, [{ $case: "jobAck", jobAck: { operationId: id } }]);
  await writeFile(go, "");
  await running;
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobAck", "jobResult"],
  );
});

test("spool - a result acked soon after it is sent never touches the disk; its done record reaches the journal with the next write", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const [id, next] = ["55555555-5555-4555-8555-555555555555", "66666666-6666-4666-8666-666666666666"];
  const dispatcher = await open(stateDir);
  const spooled: string[] = [];
  const save = dispatcher.results.save.bind(dispatcher.results);
  dispatcher.results.save = (r) => {
    spooled.push(r.operationId);
    return save(r);
  };
  // The gateway: acks each result as soon as it arrives.
  dispatcher.attach((m) => {
    if (m.msg?.$case === "jobResult") void dispatcher.handleResultAck(m.msg.jobResult.operationId);
  });
  await dispatcher.handleJob(execJob(id, "true"));
  t.deepEqual(spooled, [], "no spool write for an acked result");
  t.deepEqual(await readdir(join(stateDir, "results")), []);
  t.is(
    await readFile(join(stateDir, "journal.log"), "utf8"),
    `start ${id}\n`,
    "done waits for the next write",
  );
  await dispatcher.handleJob(execJob(next, "true"));
  t.true(
    (await readFile(join(stateDir, "journal.log"), "utf8")).startsWith(
      `start ${id}\ndone ${id}\nstart ${next}\n`,
    ),
  );
  await dispatcher.close();
  t.is(
    await readFile(join(stateDir, "journal.log"), "utf8"),
    `start ${id}\ndone ${id}\nstart ${next}\ndone ${next}\n`,
  );
  // Restarted: nothing unfinished, nothing re-sent.
  const again = await open(stateDir);
  t.teardown(() => again.close());
  const sent = recorder(again);
  await again.resendUnacked();
  t.deepEqual(sent, []);
});

test("spool - a result sent but not acked is spooled, and after a restart the real result is sent again (not 'outcome unknown')", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const id = "77777777-7777-4777-8777-777777777777";
  const dispatcher = await open(stateDir);
  const sent = recorder(dispatcher); // a stream whose gateway never acks (it died with the result)
  await dispatcher.handleJob(execJob(id, "echo kept; exit 5"));
  t.is(sent.filter((m) => m?.$case === "jobResult").length, 1, "sent once on the stream");
  t.deepEqual(await readdir(join(stateDir, "results")), [`${id}.json`]);
  await dispatcher.close();
  const again = await open(stateDir);
  t.teardown(() => again.close());
  const resent = recorder(again);
  await again.resendUnacked();
  t.is(resent.length, 1);
  t.like(resent[0], {
    $case: "jobResult",
    jobResult: { operationId: id, status: JobStatus.JOB_STATUS_COMPLETED, exitCode: 5, stdout: "kept\n" },
  });
});

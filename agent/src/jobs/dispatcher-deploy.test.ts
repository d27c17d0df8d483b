// The dispatcher's deploy wiring: a deploy job is acked, its progress goes out
// as JobProgress only while a stream is attached, and its result carries the
// DeployReport. A deployment that fails at fetch needs no container engine.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AgentMessage, DeployStepStatus, type Job, JobStatus } from "@relayctl/proto";
import test from "ava";
import { silentLogger } from "../log.js";
import { PtyRunner } from "../runner/pty-runner.js";
import { Dispatcher } from "./dispatcher.js";

const runner = new PtyRunner({ shell: "/bin/sh", outputCapBytes: 1_048_576, killGraceMs: 300 });
test.after.always(() => runner.close());

const SECRET = "env-value-never-sent-1234";

function deployJob(operationId: string, repository: string): Job {
  return {
    operationId,
    traceContext: {},
    requestId: "",
    kind: {
      $case: "deploy",
      deploy: {
        deploymentId: "7d4e2a10-9f8b-4c6d-a1e2-b3c4d5e6f708",
        applicationId: "0b9f7a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
        applicationName: "web",
        source: {
          repository,
          ref: "main",
          credential: { username: "u", password: SECRET },
          allowLocalSources: true,
        },
        build: { $case: "dockerfile", dockerfile: { dockerfile: "Dockerfile", context: "." } },
        containerPort: 8080,
        healthCheckPath: "/",
        healthCheckTimeoutSeconds: 5,
        env: { TOKEN: SECRET },
        fqdns: ["web.example.test"],
        containerBaseName: "web",
        deadlineUnixMs: Date.now() + 30_000,
        keepImages: [],
        limits: undefined,
      },
    },
  };
}

test("dispatcher deploy - acked, progress with seq 1, 2... while attached, a FAILED result with the report", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const dispatcher = await Dispatcher.open({ stateDir, runner, log: silentLogger(), ackAfterMs: 0 });
  t.teardown(() => dispatcher.close());
  const sent: AgentMessage["msg"][] = [];
  dispatcher.attach((m) => sent.push(m.msg));
  const missing = join(stateDir, "no-such-repo");
  await dispatcher.handleJob(deployJob("33333333-3333-4333-8333-333333333333", missing));
  await dispatcher.idle();
  t.is(sent[0]?.$case, "jobAck");
  const progress = sent.flatMap((m) => (m?.$case === "jobProgress" ? [m.jobProgress] : []));
  t.deepEqual(
    progress.map((p) => p.seq),
    progress.map((_, i) => i + 1),
  );
  t.is(progress[0]?.progress?.deploy.step, "fetch");
  t.is(progress.at(-1)?.progress?.deploy.status, DeployStepStatus.DEPLOY_STEP_STATUS_FAILED);
  const result = sent.at(-1);
  if (result?.$case !== "jobResult") return t.fail(`last message ${result?.$case}`);
  t.is(result.jobResult.status, JobStatus.JOB_STATUS_FAILED);
  t.is(result.jobResult.exitCode, 1);
  t.regex(result.jobResult.stderr, /^fetch: git fetch exited with code 128/);
  t.is(result.jobResult.detail?.$case === "deploy" ? result.jobResult.detail.deploy.failedStep : "", "fetch");
  t.false(JSON.stringify(sent).includes(SECRET));
});

test("dispatcher deploy - no progress while detached; the result waits for the next stream", async (t) => {
  const stateDir = await mkdtemp(join(tmpdir(), "relayctl-state-"));
  const dispatcher = await Dispatcher.open({ stateDir, runner, log: silentLogger(), ackAfterMs: 0 });
  t.teardown(() => dispatcher.close());
  await dispatcher.handleJob(deployJob("44444444-4444-4444-8444-444444444444", join(stateDir, "none")));
  await dispatcher.idle();
  const sent: AgentMessage["msg"][] = [];
  dispatcher.attach((m) => sent.push(m.msg));
  await dispatcher.resendUnacked();
  t.deepEqual(
    sent.map((m) => m?.$case),
    ["jobResult"],
  );
});

// The record of one deployment's steps: every log text is scrubbed of the job's
// secrets before it is kept or sent, each step's log is capped, and every
// change goes out as a JobProgress (seq 1, 2, 3... per operation) through
// `emit`, which drops it while no stream is attached (progress is best effort;
// the DeployReport in the result carries the whole record).
import { type CommitInfo, type DeployStep, DeployStepStatus, type JobProgress } from "@relayctl/proto";
import { SecretMatcher, scrubText } from "../runner/scrubber.js";

/** "queue": the wait for the application's turn, there only when the deployment waited. */
export type StepName = "queue" | "fetch" | "build" | "start" | "health_check" | "switch" | "retire";

const TRUNCATED = "\n[log truncated]\n";

export class StepRecorder {
  readonly steps: DeployStep[] = [];
  readonly #matcher: SecretMatcher;
  #seq = 0;

  constructor(
    readonly operationId: string,
    secrets: Iterable<string>,
    readonly emit: (progress: JobProgress) => void,
    /** Bytes of log kept per step. */
    readonly capBytes = 1024 * 1024,
  ) {
    this.#matcher = new SecretMatcher(secrets);
  }

  scrub(text: string): string {
    return this.#matcher.empty ? text : scrubText(this.#matcher, text);
  }

  /** The step running now, if any (the one a deadline cuts). */
  get current(): StepName | undefined {
    const s = this.steps.findLast((x) => x.status === DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING);
    return s?.name as StepName | undefined;
  }

  begin(name: StepName, text = ""): void {
    const now = Date.now();
    this.steps.push({
      name,
      status: DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING,
      startedAtUnixMs: now,
      endedAtUnixMs: 0,
      log: "",
    });
    this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING, this.#append(name, text), now);
  }

  log(name: StepName, text: string): void {
    const added = this.#append(name, text);
    if (added) this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING, added, Date.now());
  }

  /** Output as a program prints it: appended as is (no line end added). */
  stream(name: StepName, text: string): void {
    const added = this.#append(name, text, false);
    if (added) this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING, added, Date.now());
  }

  succeed(name: StepName, text = "", commit?: CommitInfo): void {
    this.#end(name, DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED, text, commit);
  }

  fail(name: StepName, text = ""): void {
    this.#end(name, DeployStepStatus.DEPLOY_STEP_STATUS_FAILED, text);
  }

  skip(name: StepName, text: string): void {
    const now = Date.now();
    this.steps.push({
      name,
      status: DeployStepStatus.DEPLOY_STEP_STATUS_SKIPPED,
      startedAtUnixMs: now,
      endedAtUnixMs: now,
      log: "",
    });
    this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_SKIPPED, this.#append(name, text), now);
  }

  /** A copy of the steps as they stand (the report of a result sent before retire ends). */
  snapshot(): DeployStep[] {
    return this.steps.map((s) => ({ ...s }));
  }

  #end(name: StepName, status: DeployStepStatus, text: string, commit?: CommitInfo): void {
    const now = Date.now();
    const added = this.#append(name, text);
    const step = this.#step(name);
    if (step) Object.assign(step, { status, endedAtUnixMs: now });
    this.#send(name, status, added, now, commit);
  }

  #step(name: StepName): DeployStep | undefined {
    return this.steps.findLast((s) => s.name === name);
  }

  /** Scrubs and appends to the step's log within its cap; returns what was added. */
  #append(name: StepName, raw: string, endLine = true): string {
    const step = this.#step(name);
    if (!step || raw === "" || step.log.endsWith(TRUNCATED)) return "";
    let text = this.scrub(endLine && !raw.endsWith("\n") ? `${raw}\n` : raw);
    const room = this.capBytes - Buffer.byteLength(step.log);
    if (Buffer.byteLength(text) > room) {
      text =
        Buffer.from(text)
          .subarray(0, Math.max(0, room))
          .toString("utf8")
          .replace(/\uFFFD$/, "") + TRUNCATED;
    }
    step.log += text;
    return text;
  }

  #send(step: StepName, status: DeployStepStatus, log: string, at: number, commit?: CommitInfo): void {
    this.#seq += 1;
    this.emit({
      operationId: this.operationId,
      seq: this.#seq,
      progress: { $case: "deploy", deploy: { step, status, log, atUnixMs: at, commit } },
    });
  }
}

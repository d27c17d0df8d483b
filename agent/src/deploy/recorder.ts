// The record of one deployment's steps: every log text is scrubbed of the job's
// secrets before it is kept or sent, each step's log is capped, and every
// change goes out as a JobProgress (seq 1, 2, 3... per operation) through
// `emit`, which drops it while no stream is attached (progress is best effort;
// the DeployReport in the result carries the whole record).
//
// A program's output (stream()) is sent as whole lines: a chunk of a build's
// output may end mid-line ("STEP 1/5: FROM lo" + "calhost/..."), and every
// consumer (the dashboard, the CLI, MCP, the stored log) shows a message as
// lines, so the tail of a chunk waits for its line end, per step and per output
// stream (stdout and stderr do not cut into each other's lines). A tail that
// stays without its line end (a prompt) goes out as a line after a quiet
// moment, and at the latest when its step logs anything else or ends.
import { type CommitInfo, type DeployStep, DeployStepStatus, type JobProgress } from "@relayctl/proto";
import { SecretMatcher, scrubText } from "../runner/scrubber.js";

/** "queue": the wait for the application's turn, there only when the deployment waited. */
export type StepName = "queue" | "fetch" | "build" | "start" | "health_check" | "switch" | "retire";

const TRUNCATED = "\n[log truncated]\n";

/** A line without its end goes out as it is after this much quiet (a prompt, a progress counter). */
export const PARTIAL_LINE_AFTER_MS = 1000;
/** A longer line goes out in pieces of this many characters (each a line). */
export const MAX_LINE_CHARS = 16 * 1024;

type OutputStream = "stdout" | "stderr";

/** One step's output stream: the tail after its last line end, and the timer that releases it. */
interface Partial {
  step: StepName;
  text: string;
  timer?: NodeJS.Timeout;
}

export class StepRecorder {
  readonly steps: DeployStep[] = [];
  readonly #matcher: SecretMatcher;
  /** Output tails waiting for their line end, by step and stream. */
  readonly #partials = new Map<string, Partial>();
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
    this.#flushPartials(name);
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
    this.#flushPartials(name);
    const added = this.#append(name, text);
    if (added) this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING, added, Date.now());
  }

  /**
   * Output as a program prints it, in chunks cut anywhere: sent and kept as
   * whole lines (the tail of a chunk waits for the rest of its line).
   */
  stream(name: StepName, text: string, from: OutputStream = "stdout"): void {
    const key = `${name}\0${from}`;
    const partial = this.#partials.get(key) ?? { step: name, text: "" };
    clearTimeout(partial.timer);
    let rest = partial.text + text;
    const cut = rest.lastIndexOf("\n") + 1;
    let lines = rest.slice(0, cut);
    rest = rest.slice(cut);
    for (; rest.length > MAX_LINE_CHARS; rest = rest.slice(MAX_LINE_CHARS))
      lines += `${rest.slice(0, MAX_LINE_CHARS)}\n`;
    partial.text = rest;
    if (rest) {
      partial.timer = setTimeout(() => this.#flush(key), PARTIAL_LINE_AFTER_MS);
      this.#partials.set(key, partial);
    } else this.#partials.delete(key);
    this.#output(name, lines);
  }

  succeed(name: StepName, text = "", commit?: CommitInfo): void {
    this.#end(name, DeployStepStatus.DEPLOY_STEP_STATUS_SUCCEEDED, text, commit);
  }

  fail(name: StepName, text = ""): void {
    this.#end(name, DeployStepStatus.DEPLOY_STEP_STATUS_FAILED, text);
  }

  skip(name: StepName, text: string): void {
    this.#flushPartials(name);
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
    this.#flushPartials(name);
    const now = Date.now();
    const added = this.#append(name, text);
    const step = this.#step(name);
    if (step) Object.assign(step, { status, endedAtUnixMs: now });
    this.#send(name, status, added, now, commit);
  }

  #output(name: StepName, lines: string): void {
    const added = this.#append(name, lines, false);
    if (added) this.#send(name, DeployStepStatus.DEPLOY_STEP_STATUS_RUNNING, added, Date.now());
  }

  /** A waiting tail goes out as a line of its own. */
  #flush(key: string): void {
    const partial = this.#partials.get(key);
    if (!partial) return;
    clearTimeout(partial.timer);
    this.#partials.delete(key);
    this.#output(partial.step, `${partial.text}\n`);
  }

  /** Before anything else of the step: its output so far, in the order it came. */
  #flushPartials(name: StepName): void {
    for (const [key, p] of this.#partials) if (p.step === name) this.#flush(key);
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

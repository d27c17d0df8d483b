// A LogsJob: the engine's `logs` of one container, sent back as LogsOutput
// lines and ended by one whose `end` says why. A read, not an
// operation (agent.proto LogsJob): never journaled, acked or reported in a
// Heartbeat, never queued behind a deployment. Each read is kept by its id so
// a CancelJob, or the loss of the stream its lines go to, kills its child at once.
import { type LogLine, LogStream, type LogsJob, LogsEnd, type LogsOutput } from "@relayctl/proto";
import { type ContainerEngine, type EngineOutcome, validContainerName } from "../engine/engine.js";
import type { Logger } from "../log.js";

/** The contract's bound on `tail` (the control plane checks it too). */
export const MAX_TAIL = 10_000;
/** A follow's bound when the job names none. */
const DEFAULT_MAX_SECONDS = 3600;
/** Output the scrubber holds back (in case a secret goes on) is released after this much quiet. */
const QUIET_MS = 200;
/**
 * A line without its break yet goes out as it is after this much quiet (a prompt):
 * well after the scrubber's release, or the rest of a line would become a line of its own.
 */
const PARTIAL_LINE_MS = 1000;
/** Lines are gathered this long (or up to BATCH_BYTES) into one message. */
const BATCH_MS = 50;
const BATCH_BYTES = 64 * 1024;
/** A longer line comes in pieces: a message stays well under the stream's 8 MiB. */
const MAX_LINE = 16 * 1024;
/** A quiet follow says it is alive this often (the control plane ends one silent for 3 times it). */
const KEEPALIVE_MS = 15_000;
/** An RFC 3339 time or a duration: digits first, so nothing reads as a flag. */
const SINCE = /^[0-9][0-9A-Za-z:.+-]{0,63}$/;

export type EmitOutput = (output: LogsOutput) => void;

/** The engine to read with, or why there is none. */
export type EngineFor = () => Promise<ContainerEngine | string>;

/** Splits one stream's text into lines and gathers them into messages (a read's, a streamed exec's). */
export class LineBatcher {
  readonly #partial = { stdout: "", stderr: "" };
  #lines: LogLine[] = [];
  #bytes = 0;
  #batch: NodeJS.Timeout | undefined;
  #quiet: NodeJS.Timeout | undefined;

  constructor(private readonly send: (lines: LogLine[]) => void) {}

  add(text: string, stream: "stdout" | "stderr"): void {
    let rest = this.#partial[stream] + text;
    for (let nl = rest.indexOf("\n"); nl >= 0; nl = rest.indexOf("\n")) {
      this.#line(stream, rest.slice(0, nl).replace(/\r$/, ""));
      rest = rest.slice(nl + 1);
    }
    for (; rest.length > MAX_LINE; rest = rest.slice(MAX_LINE)) this.#line(stream, rest.slice(0, MAX_LINE));
    this.#partial[stream] = rest;
    clearTimeout(this.#quiet);
    if (rest || this.#partial.stdout || this.#partial.stderr)
      this.#quiet = setTimeout(() => this.flush(), PARTIAL_LINE_MS);
    if (this.#bytes >= BATCH_BYTES) this.#sendBatch();
    else if (this.#lines.length > 0) this.#batch ??= setTimeout(() => this.#sendBatch(), BATCH_MS);
  }

  /** Everything, a line without its break included. */
  flush(): void {
    clearTimeout(this.#quiet);
    for (const stream of ["stdout", "stderr"] as const) {
      if (this.#partial[stream]) this.#line(stream, this.#partial[stream]);
      this.#partial[stream] = "";
    }
    this.#sendBatch();
  }

  #line(stream: "stdout" | "stderr", text: string): void {
    const s = stream === "stdout" ? LogStream.LOG_STREAM_STDOUT : LogStream.LOG_STREAM_STDERR;
    this.#lines.push({ stream: s, text });
    this.#bytes += text.length;
  }

  #sendBatch(): void {
    clearTimeout(this.#batch);
    this.#batch = undefined;
    if (this.#lines.length === 0) return;
    const lines = this.#lines;
    this.#lines = [];
    this.#bytes = 0;
    this.send(lines);
  }
}

/** Why a read was stopped from here (else the engine's exit says). */
type Stop = LogsEnd.LOGS_END_CANCELLED | LogsEnd.LOGS_END_MAX_TIME;

export class LogReaders {
  readonly #running = new Map<string, { abort: AbortController; why?: Stop }>();

  constructor(
    private readonly engineFor: EngineFor,
    private readonly log: Logger,
  ) {}

  /** How many reads run now (tests, shutdown). */
  get size(): number {
    return this.#running.size;
  }

  /** Reads until the end; a second job with the id of a running one is ignored. */
  async run(operationId: string, job: LogsJob, emit: EmitOutput): Promise<void> {
    if (this.#running.has(operationId)) return;
    const read = { abort: new AbortController() } as { abort: AbortController; why?: Stop };
    this.#running.set(operationId, read);
    let seq = 0;
    let lastSent = Date.now();
    const send = (lines: LogLine[], end = LogsEnd.LOGS_END_UNSPECIFIED, endDetail = "") => {
      lastSent = Date.now();
      emit({ operationId, seq: ++seq, lines, end, endDetail });
    };
    const keepalive = setInterval(() => {
      if (Date.now() - lastSent >= KEEPALIVE_MS) send([]);
    }, KEEPALIVE_MS / 3);
    try {
      const [end, detail] = await this.#read(job, read, new LineBatcher((lines) => send(lines)));
      send([], end, detail);
      this.log.info({ operation_id: operationId, end: LogsEnd[end] }, "logs read ended");
    } finally {
      clearInterval(keepalive);
      this.#running.delete(operationId);
    }
  }

  /** Kills the read's child (CancelJob); an unknown id is ignored. */
  cancel(operationId: string): void {
    const read = this.#running.get(operationId);
    if (!read) return;
    read.why ??= LogsEnd.LOGS_END_CANCELLED;
    read.abort.abort();
  }

  /** The stream the lines went to is gone: nobody reads them any more. */
  cancelAll(): void {
    for (const id of this.#running.keys()) this.cancel(id);
  }

  async #read(
    job: LogsJob,
    read: { abort: AbortController; why?: Stop },
    out: LineBatcher,
  ): Promise<[LogsEnd, string]> {
    const failed = (detail: string): [LogsEnd, string] => [LogsEnd.LOGS_END_FAILED, detail];
    if (!validContainerName(job.containerName)) return failed("invalid container name");
    if (job.since && !SINCE.test(job.since))
      return failed("since: not an RFC 3339 time or a duration such as 10m");
    const engine = await this.engineFor();
    if (typeof engine === "string") return failed(engine);
    const maxSeconds = job.maxSeconds > 0 ? job.maxSeconds : DEFAULT_MAX_SECONDS;
    const maxTime = job.follow
      ? setTimeout(() => {
          read.why ??= LogsEnd.LOGS_END_MAX_TIME;
          read.abort.abort();
        }, maxSeconds * 1000)
      : undefined;
    let outcome: EngineOutcome;
    try {
      outcome = await engine.logs(
        job.containerName,
        {
          tail: Math.min(Math.max(job.tail, 1), MAX_TAIL),
          since: job.since || undefined,
          follow: job.follow,
        },
        {
          // The agent's own bound is the backstop: the timer above ends a follow first.
          deadlineSeconds: job.follow ? maxSeconds + 60 : 120,
          signal: read.abort.signal,
          secrets: job.secrets,
          onOutput: (text, stream) => out.add(text, stream),
          flushAfterMs: QUIET_MS,
        },
      );
    } finally {
      clearTimeout(maxTime);
      out.flush();
    }
    return endOf(engine.name, job.follow, outcome, read.why);
  }
}

function endOf(engine: string, follow: boolean, o: EngineOutcome, why: Stop | undefined): [LogsEnd, string] {
  if (why === LogsEnd.LOGS_END_CANCELLED) return [why, "the reader went away"];
  if (why === LogsEnd.LOGS_END_MAX_TIME) return [why, "the follow reached its maximum time"];
  if (o.status === "failed") return [LogsEnd.LOGS_END_FAILED, o.error ?? `${engine} logs did not run`];
  if (o.status === "timeout") return [LogsEnd.LOGS_END_FAILED, `${engine} logs ${o.error ?? "timed out"}`];
  if (o.exitCode !== 0)
    return [
      LogsEnd.LOGS_END_FAILED,
      `${engine} logs exited with code ${o.exitCode} (its error is in stderr)`,
    ];
  if (follow)
    return [LogsEnd.LOGS_END_CONTAINER_GONE, "the container's log ended (it stopped or was removed)"];
  return [LogsEnd.LOGS_END_COMPLETE, ""];
}

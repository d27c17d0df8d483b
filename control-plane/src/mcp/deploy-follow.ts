// Following a deployment for deploy_application: each recorded step change
// becomes an MCP progress notification, and the call answers with the final
// deployment view. A person's token reads the deployment's live log (one SSE
// request, the same stream the dashboard and `relayctl deploy` follow); an
// automation key cannot read the dashboard API, so it polls the deploy's
// operation through the Automation API and reads the progress of the deployment
// it has just started (its own tenant's, scrubbed as in the live log) from the
// store.
import { setTimeout as sleep } from "node:timers/promises";
import type { ApiCaller } from "./api-client.js";

export interface StepProgress {
  step: string;
  status: string;
  log?: string;
}

type Report = (p: StepProgress) => Promise<void>;

/** `event:`/`data:` frames of a text/event-stream, as they arrive. */
async function* sseFrames(stream: NodeJS.ReadableStream): AsyncGenerator<{ event: string; data: string }> {
  let buffered = "";
  for await (const chunk of stream) {
    buffered += String(chunk);
    for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let event = "message";
      const data: string[] = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length > 0) yield { event, data: data.join("\n") };
    }
  }
}

const FINISHED = new Set(["completed", "failed", "timeout"]);

/** Follows the live log to the deployment's final `state` (or `end`) frame; returns its view. */
export async function followDeploymentLog(
  api: ApiCaller,
  path: string,
  report: Report,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const stream = await api.stream(`${path}/log`, signal);
  for await (const f of sseFrames(stream)) {
    const data = JSON.parse(f.data) as Record<string, unknown>;
    // The final state: the outcome is known (retire, after it, is not waited for).
    if (f.event === "end" || (f.event === "state" && FINISHED.has(String(data.status)))) return data;
    if (f.event === "progress")
      await report({ step: String(data.step), status: String(data.status), log: data.log as string });
  }
  // The stream closed without its end frame (the api stopping): the view as it stands.
  return api.json("GET", path);
}

const POLL_MS = 2000;
const PROGRESS_POLL_MS = 500;

/** The progress of one deployment of the caller's tenant after `afterSeq` (null: not the tenant's). */
export type ProgressReader = (
  deploymentId: string,
  afterSeq: number,
) => Promise<{ seq: number; step: string; status: string; log: string }[] | null>;

/**
 * An automation key's view: the deploy's operation, polled until it is no longer
 * running, with each recorded step of its deployment reported as it lands.
 */
export async function followOperation(
  api: ApiCaller,
  started: { operation_id: string; deployment_id: string },
  readProgress: ProgressReader,
  report: Report,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  let seq = 0;
  const drain = async () => {
    for (;;) {
      const batch = (await readProgress(started.deployment_id, seq)) ?? [];
      for (const p of batch) await report({ step: p.step, status: p.status, log: p.log });
      if (batch.length > 0) seq = batch[batch.length - 1]!.seq;
      if (batch.length < 500) return;
    }
  };
  let last = "";
  let nextOperationRead = 0;
  for (;;) {
    await drain();
    if (Date.now() >= nextOperationRead) {
      nextOperationRead = Date.now() + POLL_MS;
      const op = await api.json("GET", `/api/automation/v1/operations/${started.operation_id}`);
      const status = String(op.status);
      if (status !== last && status !== "running") await report({ step: "deploy", status });
      last = status;
      if (status !== "running" && status !== "queued") {
        await drain(); // what was recorded with the final state
        return op;
      }
    }
    await sleep(PROGRESS_POLL_MS, undefined, { signal });
  }
}

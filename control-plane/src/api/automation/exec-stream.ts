// POST /exec with `Accept: text/event-stream`: the command's output as it comes
// (`relayctl exec` prints it live), then how it ended. The agent sends the
// output as whole lines, scrubbed (ExecJob.stream_output, agent/src/jobs/exec.ts),
// the gateway relays them on the bus, never stored; the operation and its
// result are recorded exactly as for a plain call. The stream opens with the
// first line: until then a refusal (409 not connected, 503 bus down) is still
// the plain JSON answer.
//
//   event: started  {operation_id}
//   event: output   {stream: "stdout"|"stderr", text}      one per line
//   event: end      {operation_id, status, exit_code, duration_ms, output_complete}
//                   or {operation_id, status: "running"} past timeout_seconds
import type { ServerResponse } from "node:http";
import { LogStream, LogsEnd } from "@relayctl/proto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { JobKind, Unsubscribe } from "../../bus/job-bus.js";
import type { ApiContext } from "../../http/context.js";
import type { StartedOperation } from "../../operations/outcome.js";
import { notRunError } from "./answer.js";

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** How long the last lines may trail the result (both come over the agent's one stream, in order). */
const OUTPUT_TAIL_MS = 2000;
/** A quiet open stream says it is alive this often (proxies drop idle connections). */
const KEEPALIVE_MS = 15_000;

export const wantsStream = (req: FastifyRequest) =>
  String(req.headers.accept ?? "").includes("text/event-stream");

export async function streamExec(
  ctx: ApiContext,
  reply: FastifyReply,
  op: StartedOperation,
  kind: JobKind,
  waitMs: number,
): Promise<FastifyReply | undefined> {
  const pending: string[] = [];
  let raw: ServerResponse | undefined;
  let ended: () => void = () => {};
  const outputEnded = new Promise<void>((resolve) => {
    ended = resolve;
  });
  let complete = false;
  const write = (s: string) => (raw ? raw.write(s) : pending.push(s));
  const open = () => {
    if (raw) return;
    reply.hijack();
    raw = reply.raw;
    raw.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    raw.write(frame("started", { operation_id: op.id }));
    for (const s of pending.splice(0)) raw.write(s);
  };
  const keepalive = setInterval(() => raw?.write(": keep-alive\n\n"), KEEPALIVE_MS);
  let unsubscribe: Unsubscribe | undefined;
  try {
    // Before dispatch, so no line is missed.
    unsubscribe = await ctx.bus.subscribeLive(op.id, (o) => {
      for (const l of o.lines)
        write(
          frame("output", {
            stream: l.stream === LogStream.LOG_STREAM_STDERR ? "stderr" : "stdout",
            text: l.text,
          }),
        );
      if (o.lines.length > 0) open();
      if (o.end !== LogsEnd.LOGS_END_UNSPECIFIED) {
        complete = true;
        ended();
      }
    });
  } catch {
    // The bus is down: the dispatch below says so (503), as for a plain call.
  }
  try {
    const outcome = await ctx.ops.run(op, kind, waitMs);
    if (outcome.state === "not_run") {
      if (!raw) throw notRunError(op, outcome);
      write(frame("end", { operation_id: op.id, status: "failed", detail: outcome.reason }));
    } else if (outcome.state === "running") {
      open();
      write(frame("end", { operation_id: op.id, status: "running" }));
    } else {
      if (unsubscribe) {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          outputEnded,
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, OUTPUT_TAIL_MS);
          }),
        ]);
        clearTimeout(timer);
      }
      open();
      const r = outcome.result;
      write(
        frame("end", {
          operation_id: op.id,
          status: outcome.status,
          exit_code: r.exit_code,
          duration_ms: r.duration_ms,
          // false: a line was lost on the way (the stream is best effort); the operation has it all.
          output_complete: complete,
          ...(outcome.status === "completed" ? {} : { stderr: r.stderr }),
        }),
      );
    }
  } finally {
    clearInterval(keepalive);
    unsubscribe?.();
    raw?.end();
  }
  return raw ? undefined : reply;
}

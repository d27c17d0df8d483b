// A deployment's log as server-sent events: every progress message recorded so
// far (`event: progress`), then new ones as the agent sends them, then `event:
// end` with the deployment's final view, and the stream closes. The database is
// the source (any api instance can serve any follower, whichever gateway holds
// the agent), read every POLL_MS while the deployment runs.
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyReply } from "fastify";
import type { Knex } from "knex";
import { QUEUE_SEQ } from "./store.js";
import { deploymentState, progressSince } from "./view.js";

const POLL_MS = 250;
/** A comment line now and then keeps proxies from closing a quiet stream. */
const KEEPALIVE_MS = 15_000;

const frame = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

export async function streamDeploymentLog(
  db: Knex,
  reply: FastifyReply,
  /** appUrl: the application's URL, the `url` of the end view once it serves. */
  scope: { tenantId: string; applicationId: string; deploymentId: string; appUrl?: string | null },
  stop: AbortSignal,
): Promise<void> {
  // 404 as JSON, before the stream starts.
  let state = await deploymentState(
    db,
    scope.tenantId,
    scope.applicationId,
    scope.deploymentId,
    scope.appUrl,
  );
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  let gone = false;
  res.on("close", () => {
    gone = true;
  });
  // The control plane's queue lines come first, with negative seqs (store.ts QUEUE_SEQ).
  let seq = QUEUE_SEQ.waiting - 1;
  let quietSince = Date.now();
  try {
    for (;;) {
      const finished = state.finished;
      // Everything recorded up to the moment it was seen finished, then the end.
      for (;;) {
        const batch = await progressSince(db, state.id, seq);
        for (const p of batch) res.write(frame("progress", p));
        if (batch.length > 0) {
          seq = batch[batch.length - 1]!.seq;
          quietSince = Date.now();
        }
        if (batch.length < 500) break;
      }
      if (finished) {
        res.write(frame("end", state.view));
        break;
      }
      if (gone || stop.aborted) break;
      if (Date.now() - quietSince > KEEPALIVE_MS) {
        res.write(": keep-alive\n\n");
        quietSince = Date.now();
      }
      await sleep(POLL_MS);
      state = await deploymentState(
        db,
        scope.tenantId,
        scope.applicationId,
        scope.deploymentId,
        scope.appUrl,
      );
    }
  } finally {
    res.end();
  }
}

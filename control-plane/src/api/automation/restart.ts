// POST /api/automation/v1/restart — `<engine> restart <container_name>` on a server
// (docker, or podman where that is the agent's engine). The name is checked
// against docker's own rule here and again on the agent, and travels as one argv
// entry, never through a shell. Answers like exec: 200 with the result within
// 60 s, else 202 running; 409 when the agent is not connected.
import { finished, running } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { answerOutcome } from "./answer.js";
import { startForCaller } from "./run-operation.js";
import { restartBody } from "../../http/operation-bodies.js";
import { findServer } from "../../servers/servers.js";

/** How long the HTTP call waits for the result (the contract's exec default). */
const WAIT_SECONDS = 60;
/** Hard deadline of the engine call on the agent; a restart waits for the container's stop timeout. */
const DEADLINE_SECONDS = 300;

export const restartRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/restart`,
    access: { credentials: AUTOMATION, scope: "restart" },
    tag: "automation",
    schema: { body: restartBody },
    responses: { 200: finished, 202: running },
    handler: async (req, reply) => {
      const body = req.body;
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const op = await startForCaller(ctx, req, {
        operationType: "restart",
        server,
        runId: body.run_id,
        deadlineSeconds: DEADLINE_SECONDS,
        audit: { container_name: body.container_name },
      });
      const restart = { containerName: body.container_name, deadlineSeconds: DEADLINE_SECONDS };
      return answerOutcome(
        reply,
        op,
        await ctx.ops.run(op, { $case: "restart", restart }, WAIT_SECONDS * 1000),
      );
    },
  }),
];

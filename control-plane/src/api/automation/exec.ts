// POST /api/automation/v1/exec — run a shell command on a server.
// 200 with the result when it finishes within timeout_seconds, else 202 running;
// 409 when the server's agent is not connected (the operation is recorded failed).
// With `Accept: text/event-stream`, the output as it comes (exec-stream.ts).
import { finished, running } from "../../http/answers.js";
import type { ApiContext } from "../../http/context.js";
import { AUTOMATION, AUTOMATION_API, type RouteSpec, route } from "../../http/route.js";
import { answerOutcome } from "./answer.js";
import { streamExec, wantsStream } from "./exec-stream.js";
import { callerStart } from "./run-operation.js";
import { execBody } from "../../http/operation-bodies.js";
import { LIMITS } from "../../http/schemas.js";
import { findServer } from "../../servers/servers.js";

export const execRoutes = (ctx: ApiContext): RouteSpec[] => [
  route({
    method: "POST",
    url: `${AUTOMATION_API}/exec`,
    access: { credentials: AUTOMATION, scope: "exec", role: "owner", grant: "exec", countWithStart: true },
    tag: "automation",
    schema: { body: execBody },
    responses: { 200: finished, 202: running },
    handler: async (req, reply) => {
      const body = req.body;
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const timeoutSeconds = body.timeout_seconds ?? LIMITS.timeoutDefault;
      const start = callerStart(req, {
        operationType: "exec",
        server,
        runId: body.run_id,
        // The command runs until the server-wide ceiling; the call waits timeout_seconds.
        deadlineSeconds: ctx.config.execCeilingSeconds,
        audit: {
          command: body.command,
          working_directory: body.working_directory ?? null,
          env_keys: Object.keys(body.env ?? {}).sort(),
          timeout_seconds: timeoutSeconds,
          run_context: body.run_context ?? null,
        },
      });
      const streamed = wantsStream(req);
      const exec = {
        command: body.command,
        workingDirectory: body.working_directory ?? "",
        env: body.env ?? {},
        deadlineSeconds: ctx.config.execCeilingSeconds,
        streamOutput: streamed,
      };
      if (streamed) {
        const op = await ctx.ops.start(start);
        return streamExec(ctx, reply, op, { $case: "exec", exec }, timeoutSeconds * 1000);
      }
      // The start goes with the job: the gateway holding the agent commits it (OperationService).
      const { op, outcome } = await ctx.ops.startAndRun(
        start,
        { $case: "exec", exec },
        timeoutSeconds * 1000,
      );
      return answerOutcome(reply, op, outcome);
    },
  }),
];

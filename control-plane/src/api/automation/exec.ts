// POST /api/automation/v1/exec — run a shell command on a server.
// 200 with the result when it finishes within timeout_seconds, else 202 running;
// 409 when the server's agent is not connected (the operation is recorded failed).
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { requireOperation } from "../../auth/automation-key.js";
import type { ApiContext } from "../../http/context.js";
import { answerOutcome } from "./answer.js";
import { startForCaller } from "./run-operation.js";
import {
  LIMITS,
  envSchema,
  runContextSchema,
  runIdSchema,
  timeoutSecondsSchema,
  uuidSchema,
} from "../../http/schemas.js";
import { findServer } from "./servers.js";

/** The body's rules; the MCP tool exec_command takes the same. */
export const bodySchema = z.strictObject({
  server_id: uuidSchema,
  command: z.string().min(1).max(LIMITS.commandChars),
  working_directory: z.string().min(1).max(4096).optional(),
  env: envSchema.optional(),
  timeout_seconds: timeoutSecondsSchema.optional(),
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
});
type ExecBody = z.infer<typeof bodySchema>;

export const execRoute =
  (ctx: ApiContext): FastifyPluginAsyncZod =>
  async (app) => {
    // Scope before body validation: a key without `exec` learns nothing about the body rules.
    const preValidation = async (req: FastifyRequest) => requireOperation(req.principal, "exec");
    const opts = { schema: { body: bodySchema }, preValidation };
    app.post<{ Body: ExecBody }>("/exec", opts, async (req, reply) => {
      const body = req.body;
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const timeoutSeconds = body.timeout_seconds ?? LIMITS.timeoutDefault;
      const op = await startForCaller(ctx, req, {
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
      const exec = {
        command: body.command,
        workingDirectory: body.working_directory ?? "",
        env: body.env ?? {},
        deadlineSeconds: ctx.config.execCeilingSeconds,
      };
      return answerOutcome(reply, op, await ctx.ops.run(op, { $case: "exec", exec }, timeoutSeconds * 1000));
    });
  };

// POST /api/automation/v1/exec — run a shell command on a server.
// 200 with the result when it finishes within timeout_seconds, else 202 running;
// 409 when the server's agent is not connected (the operation is recorded failed).
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { requireOperation } from "../../auth/automation-key.js";
import { RcError } from "../../errors.js";
import type { ApiContext } from "../context.js";
import { answerOutcome } from "./answer.js";
import { startForCaller } from "./run-operation.js";
import { LIMITS, envBytes, envSchema, runContextSchema, runIdSchema, uuidSchema } from "./schemas.js";
import { findServer } from "./servers.js";

interface ExecBody {
  server_id: string;
  command: string;
  working_directory?: string;
  env?: Record<string, string>;
  timeout_seconds?: number;
  run_id?: string;
  run_context?: Record<string, string>;
}

const bodySchema = {
  type: "object",
  required: ["server_id", "command"],
  additionalProperties: false,
  properties: {
    server_id: uuidSchema,
    command: { type: "string", minLength: 1, maxLength: LIMITS.commandChars },
    working_directory: { type: "string", minLength: 1, maxLength: 4096 },
    env: envSchema,
    timeout_seconds: { type: "integer", minimum: LIMITS.timeoutMin, maximum: LIMITS.timeoutMax },
    run_id: runIdSchema,
    run_context: runContextSchema,
  },
} as const;

export const execRoute =
  (ctx: ApiContext): FastifyPluginAsync =>
  async (app) => {
    // Scope before body validation: a key without `exec` learns nothing about the body rules.
    const preValidation = async (req: FastifyRequest) => requireOperation(req.principal, "exec");
    const opts = { schema: { body: bodySchema }, preValidation };
    app.post<{ Body: ExecBody }>("/exec", opts, async (req, reply) => {
      const body = req.body;
      const size = envBytes(body.env);
      if (size > LIMITS.envBytes) {
        throw new RcError(
          "RC_ERR_VALIDATION",
          `env: total size ${size} bytes exceeds ${LIMITS.envBytes} bytes`,
        );
      }
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

// POST /api/automation/v1/exec — run a shell command on a server.
// 200 with the result when it finishes within timeout_seconds, else 202 running;
// 409 when the server's agent is not connected (the operation is recorded failed).
import type { FastifyRequest } from "fastify";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { requireOperation } from "../../auth/automation-key.js";
import { RcError } from "../../errors.js";
import type { ApiContext } from "../context.js";
import { runOperation } from "./run-operation.js";
import {
  LIMITS,
  envBytes,
  envSchema,
  runContextSchema,
  runIdSchema,
  timeoutSecondsSchema,
  uuidSchema,
} from "./schemas.js";
import { findServer } from "./servers.js";

const bodySchema = z.strictObject({
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
      const size = envBytes(body.env);
      if (size > LIMITS.envBytes) {
        throw new RcError(
          "RC_ERR_VALIDATION",
          `env: total size ${size} bytes exceeds ${LIMITS.envBytes} bytes`,
        );
      }
      const server = await findServer(ctx.db, req.principal, body.server_id);
      const timeoutSeconds = body.timeout_seconds ?? LIMITS.timeoutDefault;
      return runOperation(ctx, req, reply, {
        operationType: "exec",
        server,
        runId: body.run_id,
        deadlineSeconds: ctx.config.execCeilingSeconds,
        waitSeconds: timeoutSeconds,
        audit: {
          command: body.command,
          working_directory: body.working_directory ?? null,
          env_keys: Object.keys(body.env ?? {}).sort(),
          timeout_seconds: timeoutSeconds,
          run_context: body.run_context ?? null,
        },
        job: {
          exec: {
            command: body.command,
            working_directory: body.working_directory ?? "",
            env: body.env ?? {},
            deadline_seconds: ctx.config.execCeilingSeconds,
          },
        },
      });
    });
  };

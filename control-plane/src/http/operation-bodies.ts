// The bodies of the operations that both the Automation API and the MCP tools
// take (one rule, two doors): exec, restart, rollback, and a deployment's deadline.
import { z } from "zod";
import {
  LIMITS,
  envSchema,
  runContextSchema,
  runIdSchema,
  timeoutSecondsSchema,
  uuidSchema,
} from "./schemas.js";

/** The body's rules; the MCP tool exec_command takes the same. */
export const execBody = z.strictObject({
  server_id: uuidSchema,
  command: z.string().min(1).max(LIMITS.commandChars),
  working_directory: z.string().min(1).max(4096).optional(),
  env: envSchema.optional(),
  timeout_seconds: timeoutSecondsSchema.optional(),
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
});

/** The body's rules; the MCP tool restart_container takes the same. */
export const restartBody = z.strictObject({
  server_id: uuidSchema,
  // docker's rule for container names (daemon/names.RestrictedNamePattern).
  container_name: z
    .string()
    .regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/)
    .max(255),
  run_id: runIdSchema.optional(),
});

/** The contract's default; the bound is ours (an hour covers any real build). */
export const DEPLOY_TIMEOUT = { min: 1, max: 3600, default: 60 } as const;
export const deployTimeoutSchema = z.int().min(DEPLOY_TIMEOUT.min).max(DEPLOY_TIMEOUT.max);

/** The body's rules; the MCP tool rollback_application takes the same. */
export const rollbackBody = z.strictObject({
  application_id: uuidSchema,
  release: uuidSchema
    .optional()
    .describe("the deployment id of the release to start again; default: the release before the live one"),
  timeout_seconds: deployTimeoutSchema.optional(),
  run_id: runIdSchema.optional(),
  run_context: runContextSchema.optional(),
});

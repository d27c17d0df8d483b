// zod schemas shared by the Automation API routes. Limits are the contract's
// (spec "Limits"); bodies are not coerced, so "5" is not an integer here, and
// unknown fields are refused (strict objects).
import { z } from "zod";

export { isUuid, uuid as uuidSchema } from "./validation.js";

export const LIMITS = {
  commandChars: 8192,
  envKeys: 200,
  envBytes: 64 * 1024,
  timeoutMin: 1,
  timeoutMax: 900,
  timeoutDefault: 60,
} as const;

export const runIdSchema = z.string().min(1).max(255);

const ctxField = z.string().max(1024);
/** CI metadata; the named fields are strings, extra string keys are kept too. */
export const runContextSchema = z
  .object({
    provider: ctxField.optional(),
    repository: ctxField.optional(),
    workflow: ctxField.optional(),
    trigger: ctxField.optional(),
    actor: ctxField.optional(),
    sha: ctxField.optional(),
    ref: ctxField.optional(),
  })
  .catchall(ctxField)
  .refine((o) => Object.keys(o).length <= 32, { error: "must have at most 32 keys" });

/** Bytes of keys and values together (the contract's "64KB total"). */
export function envBytes(env: Record<string, string> | undefined): number {
  let total = 0;
  for (const [k, v] of Object.entries(env ?? {})) total += Buffer.byteLength(k) + Buffer.byteLength(v);
  return total;
}

/** env / env_overrides: at most 200 keys and 64 KB of keys and values together. */
export const envSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).check((ctx) => {
  const keys = Object.keys(ctx.value).length;
  if (keys > LIMITS.envKeys) {
    ctx.issues.push({
      code: "custom",
      input: ctx.value,
      message: `must have at most ${LIMITS.envKeys} keys`,
    });
    return;
  }
  const size = envBytes(ctx.value);
  if (size > LIMITS.envBytes)
    ctx.issues.push({
      code: "custom",
      input: ctx.value,
      message: `total size ${size} bytes exceeds ${LIMITS.envBytes} bytes`,
    });
});

export const timeoutSecondsSchema = z.int().min(LIMITS.timeoutMin).max(LIMITS.timeoutMax);

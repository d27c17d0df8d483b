// JSON schemas shared by the Automation API routes. Limits are the contract's
// (spec "Limits"); ajv runs without type coercion, so "5" is not an integer here.

export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";

export const LIMITS = {
  commandChars: 8192,
  envKeys: 200,
  envBytes: 64 * 1024,
  timeoutMin: 1,
  timeoutMax: 900,
  timeoutDefault: 60,
} as const;

export const uuidSchema = { type: "string", pattern: UUID_PATTERN } as const;

export const runIdSchema = { type: "string", minLength: 1, maxLength: 255 } as const;

/** CI metadata; the named fields are strings, extra string keys are kept too. */
export const runContextSchema = {
  type: "object",
  maxProperties: 32,
  properties: {
    provider: { type: "string", maxLength: 1024 },
    repository: { type: "string", maxLength: 1024 },
    workflow: { type: "string", maxLength: 1024 },
    trigger: { type: "string", maxLength: 1024 },
    actor: { type: "string", maxLength: 1024 },
    sha: { type: "string", maxLength: 1024 },
    ref: { type: "string", maxLength: 1024 },
  },
  additionalProperties: { type: "string", maxLength: 1024 },
} as const;

export const envSchema = {
  type: "object",
  maxProperties: LIMITS.envKeys,
  propertyNames: { pattern: "^[A-Za-z_][A-Za-z0-9_]*$" },
  additionalProperties: { type: "string" },
} as const;

export const errorSchema = {
  type: "object",
  properties: { detail: { type: "string" } },
  required: ["detail"],
} as const;

/** Bytes of keys and values together (the contract's "64KB total"). */
export function envBytes(env: Record<string, string> | undefined): number {
  let total = 0;
  for (const [k, v] of Object.entries(env ?? {})) total += Buffer.byteLength(k) + Buffer.byteLength(v);
  return total;
}

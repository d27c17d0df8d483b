// Route validation with zod (fastify-type-provider-zod): one schema per route is
// its TypeScript type, its validation and, later, its OpenAPI document. The
// compiler here turns zod's issues into the ajv-shaped errors http/errors.ts
// already words as the contract's 422 `{"detail"}`: "command: is required",
// "env.FOO: must be string", "extra: is not a known field".
import type { FastifySerializerCompiler, FastifySchemaCompiler } from "fastify";
import { type ZodType, z } from "zod";

/**
 * Response schemas document answers (OpenAPI); they do not filter them. zod's
 * serializer would strip a field the schema forgot and answer 500 for one it
 * words differently: a documentation slip must not break a working endpoint.
 * test/openapi.test.ts holds real answers to the schemas instead.
 */
export const serializerCompiler: FastifySerializerCompiler<ZodType> = () => (data) => JSON.stringify(data);

/** The error shape http/errors.ts validationDetail() words (ajv's). */
interface FieldError {
  instancePath: string;
  keyword: string;
  message: string;
  params: Record<string, unknown>;
}

const TYPE_NAMES: Record<string, string> = { int: "integer", record: "object", safeint: "integer" };

type Issue = z.core.$ZodIssue;

function bound(issue: Issue & { code: "too_big" | "too_small" }): string {
  const n = issue.code === "too_big" ? issue.maximum : issue.minimum;
  const most = issue.code === "too_big" ? "at most" : "at least";
  switch (issue.origin) {
    case "string":
      return `must be ${most} ${n} characters`;
    case "array":
    case "set":
      return `must have ${most} ${n} items`;
    case "number":
    case "int":
      return issue.code === "too_big"
        ? `must be ${issue.inclusive === false ? "<" : "<="} ${n}`
        : `must be ${issue.inclusive === false ? ">" : ">="} ${n}`;
    default:
      return `must be ${most} ${n}`;
  }
}

function message(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type":
      return `must be ${TYPE_NAMES[issue.expected] ?? issue.expected}`;
    case "too_big":
    case "too_small":
      return bound(issue);
    case "invalid_format":
      if (issue.format === "uuid") return "must be a UUID";
      if (issue.format === "datetime") return "must be an ISO 8601 date-time with a time zone";
      // A route's own words for a pattern (`.regex(re, { error })`) win over the
      // pattern itself; zod's default message starts "Invalid".
      if (issue.format === "regex")
        return issue.message && !issue.message.startsWith("Invalid")
          ? issue.message
          : `must match pattern "${String(issue.pattern).replace(/^\/|\/$/g, "")}"`;
      return `must be a valid ${issue.format}`;
    case "invalid_value":
      return `must be one of: ${issue.values.map(String).join(", ")}`;
    case "invalid_key":
      return "is not an allowed key";
    default:
      return issue.message ?? "is invalid";
  }
}

/** One zod issue as ajv would have reported it, so the detail reads the same. */
function toFieldError(issue: Issue, data: unknown): FieldError {
  const instancePath = issue.path.length ? `/${issue.path.join("/")}` : "";
  if (issue.code === "unrecognized_keys") {
    return {
      instancePath,
      keyword: "additionalProperties",
      message: "",
      params: { additionalProperty: issue.keys[0] },
    };
  }
  if (issue.code === "invalid_type" && valueAt(data, issue.path) === undefined) {
    const parent = issue.path.slice(0, -1);
    return {
      instancePath: parent.length ? `/${parent.join("/")}` : "",
      keyword: "required",
      message: "is required",
      params: { missingProperty: String(issue.path[issue.path.length - 1] ?? "") },
    };
  }
  return { instancePath, keyword: issue.code, message: message(issue), params: {} };
}

function valueAt(data: unknown, path: PropertyKey[]): unknown {
  let v = data;
  for (const k of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** The words of one issue without its field ("is required", "must be <= 900"). */
export function validationMessage(issue: Issue, data?: unknown): string {
  const e = toFieldError(issue, data);
  if (e.keyword === "additionalProperties") return "is not a known field";
  return e.message;
}

/** Fastify validator compiler for zod schemas; the first issue becomes the 422 detail. */
export const validatorCompiler: FastifySchemaCompiler<ZodType> =
  ({ schema }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    return { error: result.error.issues.map((i) => toFieldError(i, data)) as never };
  };

// ---- Shared field schemas (one definition of each rule) ----

/** A UUID (`format: uuid`); stored ids are lower case, so it is normalised here. */
export const uuid = z.uuid().transform((s) => s.toLowerCase());

/** An ISO 8601 date-time with a zone (`format: date-time`). */
export const dateTime = z.iso.datetime({ offset: true });

const uuidCheck = z.uuid();
/** For path ids, where a malformed id is a 404 like an unknown one (no existence leak). */
export const isUuid = (s: string): boolean => uuidCheck.safeParse(s).success;

/** A whole number in a query string ("25" → 25). */
export const queryInt = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

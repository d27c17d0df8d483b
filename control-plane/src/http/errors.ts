// Turns every error the api can meet (ours, Fastify's, ajv's) into one of the
// catalogue's codes (errors.ts), which gives the status, and the contract's
// `{"detail": string}` body. Nothing unexpected leaks out: an unknown error is
// RC_ERR_INTERNAL (500) with a generic detail, and is logged.
import type { FastifyError, FastifyInstance } from "fastify";
import { isStoreUnavailable } from "../db/unavailable.js";
import { type ErrorCode, RcError, SWITCHED_OFF } from "../errors.js";

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** "env.FOO: must be string", "command: is required" — the field comes first. */
export function validationDetail(errors: AjvError[], context: string | undefined): string {
  const e = errors[0];
  let field = e.instancePath.replace(/^\//, "").replace(/\//g, ".");
  let message = e.message ?? "is invalid";
  if (e.keyword === "required") {
    field = [field, String(e.params.missingProperty)].filter(Boolean).join(".");
    message = "is required";
  } else if (e.keyword === "additionalProperties") {
    field = [field, String(e.params.additionalProperty)].filter(Boolean).join(".");
    message = "is not a known field";
  } else if (e.keyword === "maxProperties") {
    message = `must have at most ${e.params.limit} keys`;
  }
  return `${field || context || "body"}: ${message}`;
}

/** Fastify's own request errors, each mapped to our code (and so to its status). */
const FASTIFY_CODES: Record<string, { code: ErrorCode; detail: (e: FastifyError) => string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: "RC_ERR_UNSUPPORTED_MEDIA_TYPE",
    detail: () => "unsupported content type: send application/json",
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: "RC_ERR_BAD_REQUEST",
    detail: () => "request body is empty: send a JSON object",
  },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: "RC_ERR_BAD_REQUEST",
    detail: (e) => `request body is not valid JSON: ${e.message}`,
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: "RC_ERR_PAYLOAD_TOO_LARGE", detail: () => "request body too large" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: "RC_ERR_BAD_REQUEST", detail: () => "invalid content-length" },
};

/** Any error a request can end with, as one of the catalogue's. */
export function toRcError(err: FastifyError & { validationContext?: string }): RcError {
  if (err instanceof RcError) return err;
  if (err.validation) {
    return new RcError(
      "RC_ERR_VALIDATION",
      validationDetail(err.validation as AjvError[], err.validationContext),
    );
  }
  const known = err.code ? FASTIFY_CODES[err.code] : undefined;
  if (known) return new RcError(known.code, known.detail(err), { cause: err });
  // Fastify's JSON parser: a body that is not JSON is the client's error.
  if (err instanceof SyntaxError) {
    return new RcError("RC_ERR_BAD_REQUEST", `request body is not valid JSON: ${err.message}`, {
      cause: err,
    });
  }
  if (isStoreUnavailable(err)) return new RcError("RC_ERR_STORE_UNAVAILABLE", undefined, { cause: err });
  // Any other request error Fastify raises itself (a malformed URL...): the client's.
  if (err.code?.startsWith("FST_ERR_") && err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return new RcError("RC_ERR_BAD_REQUEST", err.message, { cause: err });
  }
  return new RcError("RC_ERR_INTERNAL", undefined, { cause: err });
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError & { validationContext?: string }, req, reply) => {
    // A refusal of an admission that ran after the route failed answers in its place (auth/deferred-count.ts).
    const e = toRcError((req.admissionRefusal as FastifyError | null) ?? err);
    if (e.code === "RC_ERR_INTERNAL") req.log.error({ err }, "unhandled error");
    else if (e.status >= 500 && !SWITCHED_OFF.has(e.code)) req.log.error({ err, cause: e.cause }, e.code);
    return reply.status(e.status).send(e.body());
  });

  app.setNotFoundHandler((req, reply) => {
    const e = new RcError(
      "RC_ERR_ROUTE_NOT_FOUND",
      `route not found: ${req.method} ${req.url.split("?")[0]}`,
    );
    reply.status(e.status).send(e.body());
  });
}

// Turns every error the api can meet (ours, Fastify's, ajv's) into the contract's
// `{"detail": string}` body with the right status. Nothing unexpected leaks out:
// an unknown error is a 500 with a generic detail, and is logged.
import type { FastifyError, FastifyInstance } from "fastify";
import { isStoreUnavailable } from "../db/unavailable.js";
import { RcError } from "../errors.js";

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

const FASTIFY_CODES: Record<string, { status: number; detail: (e: FastifyError) => string }> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    status: 415,
    detail: () => "unsupported content type: send application/json",
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: { status: 400, detail: () => "request body is empty: send a JSON object" },
  FST_ERR_CTP_INVALID_JSON_BODY: {
    status: 400,
    detail: (e) => `request body is not valid JSON: ${e.message}`,
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { status: 413, detail: () => "request body too large" },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { status: 400, detail: () => "invalid content-length" },
};

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError & { validationContext?: string }, req, reply) => {
    if (err instanceof RcError) {
      if (err.status >= 500) req.log.error({ err, cause: err.cause }, err.code);
      return reply.status(err.status).send(err.body());
    }
    if (err.validation) {
      return reply
        .status(422)
        .send({ detail: validationDetail(err.validation as AjvError[], err.validationContext) });
    }
    const known = err.code ? FASTIFY_CODES[err.code] : undefined;
    if (known) return reply.status(known.status).send({ detail: known.detail(err) });
    if (err instanceof SyntaxError || (err.statusCode === 400 && /JSON/i.test(err.message))) {
      return reply.status(400).send({ detail: `request body is not valid JSON: ${err.message}` });
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.status(err.statusCode).send({ detail: err.message });
    }
    if (isStoreUnavailable(err)) {
      const e = new RcError("RC_ERR_STORE_UNAVAILABLE", undefined, { cause: err });
      req.log.error({ err }, e.code);
      return reply.status(e.status).send(e.body());
    }
    req.log.error({ err }, "unhandled error");
    return reply.status(500).send({ detail: "internal error" });
  });

  app.setNotFoundHandler((req, reply) => {
    reply.status(404).send({ detail: `route not found: ${req.method} ${req.url.split("?")[0]}` });
  });
}

// JSON logs on stdout. Anything that could carry a secret is redacted by path;
// request bodies are never logged at all. Every line logged inside an API
// request's work (or a job it started) names the request: `req_id`.
import pino, { type DestinationStream, type Logger } from "pino";
import { requestIdMixin } from "../tracing/request-id.js";

/** `destination` (default stdout) lets `make dev` print the same JSON lines readably. */
export function createLogger(
  level: string,
  base: Record<string, unknown>,
  destination?: DestinationStream,
): Logger {
  const options = {
    level,
    base: { svc: "relayctl-server", ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: requestIdMixin,
    redact: {
      paths: ["req.headers.authorization", "headers.authorization", "*.env", "env", "*.password", "password"],
      censor: "[redacted]",
    },
  };
  return destination ? pino(options, destination) : pino(options);
}

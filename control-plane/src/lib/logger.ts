// JSON logs on stdout. Anything that could carry a secret is redacted by path;
// request bodies are never logged at all.
import pino, { type Logger } from "pino";

export function createLogger(level: string, base: Record<string, unknown>): Logger {
  return pino({
    level,
    base: { svc: "relayctl-server", ...base },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ["req.headers.authorization", "headers.authorization", "*.env", "env", "*.password", "password"],
      censor: "[redacted]",
    },
  });
}

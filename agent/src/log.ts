// One pino logger for the agent: JSON lines on stdout (process-interfaces.md).
import { type Logger, pino } from "pino";
import type { LogLevel } from "./config.js";

export type { Logger };

export function createLogger(level: LogLevel): Logger {
  return pino({ name: "relayctl-agent", level, base: { pid: process.pid } });
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

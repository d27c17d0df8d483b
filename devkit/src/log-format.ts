// Readable dev logs: pino JSON lines through pino-pretty, after making every value safe to
// print. A field is data from elsewhere (an agent's boot id, a command's output): a newline
// in it must not start what looks like a log line of its own, an escape sequence must not
// drive the terminal, and one huge value must not flood it. So control characters are
// shown escaped (\n, \u001b) and each string is capped, before pino-pretty sees the line.
import { prettyFactory } from "pino-pretty";

/** Characters kept of one string value; the rest is counted, not printed. */
export const MAX_FIELD_CHARS = 1_000;
/** A stack keeps its line breaks (pino-pretty indents them) and gets more room. */
const MAX_STACK_CHARS = 8_000;
const MAX_DEPTH = 6;

// C0 controls, DEL and C1 controls; the line separators U+2028/U+2029 as well.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the same, minus \n
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeChar(c: string): string {
  return NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/** The string with control characters escaped and at most `max` characters of it kept. */
export function safeText(s: string, max = MAX_FIELD_CHARS, keepNewlines = false): string {
  const capped = s.length > max ? `${s.slice(0, max)}…[${s.length - max} more chars]` : s;
  return capped.replace(keepNewlines ? CONTROL_BUT_NEWLINE : CONTROL, escapeChar);
}

function safeValue(value: unknown, key: string, depth: number): unknown {
  if (typeof value === "string") {
    return key === "stack" ? safeText(value, MAX_STACK_CHARS, true) : safeText(value);
  }
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return "[nested too deep]";
  if (Array.isArray(value)) return value.map((v) => safeValue(v, "", depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[safeText(k, 100)] = safeValue(v, k, depth + 1);
  return out;
}

/** A pino log object with every key and string value made safe to print. */
export function safeLogObject(log: Record<string, unknown>): Record<string, unknown> {
  return safeValue(log, "", 0) as Record<string, unknown>;
}

export interface LogFormatOptions {
  /** ANSI colours (a terminal that is not NO_COLOR). @default false */
  colorize?: boolean;
}

/**
 * A formatter for one output line of a relayctl process: a pino JSON line becomes one
 * pino-pretty line (time, level, message, the other fields as JSON; a stack below it,
 * indented); anything else is printed as is, escaped and capped. No trailing newline.
 */
export function logFormatter(opts: LogFormatOptions = {}): (text: string) => string {
  const pretty = prettyFactory({
    colorize: opts.colorize ?? false,
    singleLine: true,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname,svc,role",
  });
  return (text) => {
    const json = parseObject(text);
    if (!json) return safeText(text, MAX_FIELD_CHARS * 4);
    return pretty(safeLogObject(json)).replace(/\n$/, "");
  };
}

function parseObject(text: string): Record<string, unknown> | undefined {
  if (!text.startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

// Where the built programs are. Tests drive them as processes, never import their internals.
import { resolve } from "node:path";

export const REPO_ROOT = resolve(__dirname, "../..");
export const SERVER_MAIN = resolve(REPO_ROOT, "control-plane/dist/cli/main.js");
export const AGENT_MAIN = resolve(REPO_ROOT, "agent/dist/cli/main.js");

/** Parses a CLI's JSON answer: the whole stdout, else its last line that is a JSON object. */
export function parseJsonOutput(stdout: string, what: string): Record<string, unknown> {
  const candidates = [stdout.trim(), ...stdout.trim().split("\n").reverse()];
  for (const text of candidates) {
    try {
      const value: unknown = JSON.parse(text);
      if (value !== null && typeof value === "object") return value as Record<string, unknown>;
    } catch {
      // try the next candidate
    }
  }
  throw new Error(`${what}: no JSON object in output:\n${stdout}`);
}

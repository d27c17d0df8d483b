// Where the built programs are. Tests drive them as processes, never import their internals.
import { resolve } from "node:path";
import { jsonAnswer } from "@relayctl/devkit";

export const REPO_ROOT = resolve(__dirname, "../..");
export const SERVER_MAIN = resolve(REPO_ROOT, "control-plane/dist/cli/main.js");
export const AGENT_MAIN = resolve(REPO_ROOT, "agent/dist/cli/main.js");

/** Parses a CLI's JSON answer: the whole stdout, else its last line that is a JSON object. */
export function parseJsonOutput(stdout: string, what: string): Record<string, unknown> {
  return jsonAnswer(stdout, what);
}

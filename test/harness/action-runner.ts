// Runs the bundled deploy-sync action (action/dist/index.js) the way the GitHub
// runner does: inputs as INPUT_<NAME> environment variables, action.yml's
// defaults filled in, outputs read back from the GITHUB_OUTPUT file and the job
// summary from GITHUB_STEP_SUMMARY.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { makeTempDir } from "./cleanup";

const ACTION_DIR = resolve(__dirname, "../../action");
const RUN_TIMEOUT_MS = 90_000;
/** GitHub retires node20 for actions; the bundle targets node24 (scripts/action-bundle.sh). */
const ACTION_RUNTIME = "node24";

export interface ActionRun {
  code: number | null;
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  summary: string;
}

interface ActionYml {
  runs: { using: string; main: string };
  inputs: Record<string, { default?: string }>;
}

/** The runner evaluates `${{ github.* }}` defaults; these are the two action.yml uses. */
function evaluateDefault(value: string, env: Record<string, string>): string {
  return value
    .replace("${{ github.run_id }}", env.GITHUB_RUN_ID ?? "")
    .replace("${{ github.sha }}", env.GITHUB_SHA ?? "");
}

/** GITHUB_OUTPUT holds `name<<DELIMITER\nvalue\nDELIMITER` blocks. */
function parseOutputFile(text: string): Record<string, string> {
  const outputs: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = /^([^<=]+)<<(.+)$/.exec(lines[i]);
    if (!m) continue;
    const value: string[] = [];
    for (i++; i < lines.length && lines[i] !== m[2]; i++) value.push(lines[i]);
    outputs[m[1]] = value.join("\n");
  }
  return outputs;
}

export async function runAction(
  inputs: Record<string, string>,
  extraEnv: Record<string, string> = {},
): Promise<ActionRun> {
  const yml = parse(readFileSync(join(ACTION_DIR, "action.yml"), "utf8")) as ActionYml;
  if (yml.runs.using !== ACTION_RUNTIME) throw new Error(`action.yml runs.using is ${yml.runs.using}`);
  // The runner starts the bundle with its own node of that major; ours must match to stand in for it.
  const major = process.versions.node.split(".")[0];
  if (`node${major}` !== ACTION_RUNTIME)
    throw new Error(`tests run on Node ${major}, the action on ${ACTION_RUNTIME}`);
  const dir = makeTempDir("action");
  const outputFile = join(dir, "output");
  const summaryFile = join(dir, "summary.md");
  writeFileSync(outputFile, "");
  writeFileSync(summaryFile, "");
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: dir,
    GITHUB_ACTIONS: "true",
    GITHUB_RUN_ID: "9100200300",
    GITHUB_SHA: "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed",
    GITHUB_WORKSPACE: dir,
    GITHUB_OUTPUT: outputFile,
    GITHUB_STEP_SUMMARY: summaryFile,
    ...extraEnv,
  };
  for (const [name, spec] of Object.entries(yml.inputs)) {
    const value =
      inputs[name] ?? (spec.default === undefined ? undefined : evaluateDefault(spec.default, env));
    if (value !== undefined) env[`INPUT_${name.toUpperCase()}`] = value;
  }
  for (const name of Object.keys(inputs)) {
    if (!(name in yml.inputs)) throw new Error(`action.yml has no input '${name}'`);
  }

  const child = spawn(process.execPath, [join(ACTION_DIR, yml.runs.main)], {
    cwd: env.GITHUB_WORKSPACE,
    env,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((res, rej) => {
    child.on("error", rej);
    child.on("close", (c) => res(c));
  }).finally(() => clearTimeout(timer));
  return {
    code,
    stdout,
    stderr,
    outputs: parseOutputFile(readFileSync(outputFile, "utf8")),
    summary: readFileSync(summaryFile, "utf8"),
  };
}

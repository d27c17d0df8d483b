// Entry point of the bundled action (dist/index.js): binds the runner's
// protocol (@actions/core) to deploySync and turns any error into a failed step.
import * as core from "@actions/core";
import { type ActionIO, deploySync } from "./deploy-sync.js";
import { readInputs } from "./inputs.js";

const io: ActionIO = {
  info: (m) => core.info(m),
  warning: (m) => core.warning(m),
  setSecret: (s) => core.setSecret(s),
  setOutput: (n, v) => core.setOutput(n, v),
  setFailed: (m) => core.setFailed(m),
  async writeSummary(title, header, rows, footer) {
    if (!process.env.GITHUB_STEP_SUMMARY) return;
    // The summary is a courtesy: a runner that cannot take it must not fail a good sync.
    try {
      await core.summary
        .addHeading(title, 3)
        .addTable([header.map((data) => ({ data, header: true })), ...rows])
        .addRaw(footer, true)
        .write();
    } catch (err) {
      core.warning(`job summary not written: ${(err as Error).message}`);
    }
  },
};

async function main(): Promise<void> {
  try {
    const inputs = readInputs((name) => core.getInput(name), process.env);
    core.setSecret(inputs.apiKey);
    await deploySync(inputs, io, process.env);
  } catch (err) {
    core.setFailed((err as Error).message);
  }
}

void main();

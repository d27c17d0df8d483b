#!/usr/bin/env node
// relayctl: the command-line client of the relayctl API. Every command is a
// client of the public HTTP API (no back door); errors are one line on stderr
// with an exit code per kind (errors.ts).
import { Command, CommanderError } from "commander";
import { registerApps } from "./commands/apps.js";
import { registerAudit } from "./commands/audit.js";
import { registerAuth } from "./commands/auth.js";
import { registerCompletion } from "./commands/completion.js";
import { registerDeploy } from "./commands/deploy.js";
import { registerExec } from "./commands/exec.js";
import { registerForges } from "./commands/forges.js";
import { registerKeys } from "./commands/keys.js";
import { registerLogs } from "./commands/logs.js";
import { registerMcp } from "./commands/mcp.js";
import { registerOps } from "./commands/ops.js";
import { registerPreviews } from "./commands/previews.js";
import { registerRegistry } from "./commands/registry.js";
import { registerServers } from "./commands/servers.js";
import { CliError, EXIT } from "./errors.js";

// `relayctl … | head` closes the pipe early: the reader has what it wanted, so end quietly
// (as git and gh do) instead of printing an EPIPE stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(0);
    throw err;
  });
}

// From src/ and dist/ alike; esbuild inlines it into the single-file bundle (scripts/cli-bundle.mjs).
const { version } = require("../package.json") as { version: string };

const program = new Command()
  .name("relayctl")
  .description("relayctl: run operations on your servers, deploy applications, manage keys")
  .version(version)
  .option("--url <url>", "the relayctl server (or RELAYCTL_URL; default: the one you logged in to)")
  .option("--token <token>", "use this rca_/rck_ key or rco_ token instead of your login (or RELAYCTL_TOKEN)")
  .option("--json", "print the answer as JSON, for scripts")
  // Every command's --help lists --json, --url and --token too: they work after any command.
  .configureHelp({ showGlobalOptions: true })
  .addHelpText(
    "after",
    `
Examples:
  relayctl login --url https://relayctl.example.com
  relayctl servers list
  relayctl exec web-1 -- uptime
  relayctl deploy shop --ref main --wait
  RELAYCTL_TOKEN=rca_... relayctl exec 6f1c... -- ./smoke-test.sh

Exit codes: 0 ok; a remote command's own code (exec); 1 the operation failed (deploy, restart);
64 usage; 65 request refused (404, 409, 422); 69 server error or unreachable;
77 not logged in, login ended, or not allowed (401, 403); 124 exec still running at --timeout.`,
  )
  // Usage errors come back here as CommanderError instead of exiting, to get their own exit code.
  .exitOverride()
  .configureOutput({ outputError: (str, write) => write(`relayctl: ${str.replace(/^error: /, "")}`) });

registerAuth(program);
registerServers(program);
registerApps(program);
registerDeploy(program);
registerPreviews(program);
registerExec(program);
registerLogs(program);
registerOps(program);
registerKeys(program);
registerAudit(program);
registerRegistry(program);
registerForges(program);
registerMcp(program);
registerCompletion(program);

program.parseAsync(process.argv).catch((err: unknown) => {
  if (err instanceof CommanderError) {
    // --help and --version "fail" with exit code 0; everything else commander raises is usage.
    process.exit(err.exitCode === 0 ? EXIT.ok : EXIT.usage);
  }
  if (err instanceof CliError) {
    process.stderr.write(`relayctl: ${err.message}\n`);
    process.exit(err.exitCode);
  }
  process.stderr.write(`relayctl: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(EXIT.failed);
});
